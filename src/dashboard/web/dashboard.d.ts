// dashboard.js is served to browsers as it is; the server imports it as text.
declare const text: string;
export default text;
