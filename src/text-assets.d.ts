// Stylesheets imported `with { type: 'text' }` arrive as their text.
declare module '*.css' {
  const text: string;
  export default text;
}

// Scalar's browser bundle, imported `with { type: 'file' }`: its path, inside the executable once compiled.
// The dashboard's icon, imported `with { type: 'text' }`.
declare module '*.svg' {
  const text: string;
  export default text;
}

declare module '*/standalone.js' {
  const path: string;
  export default path;
}

// The dashboard's vendored modules (Preact, its hooks, htm, uPlot), imported `with { type: 'text' }`.
declare module '*/preact.module.js' {
  const text: string;
  export default text;
}
declare module '*/hooks.module.js' {
  const text: string;
  export default text;
}
declare module '*/htm.module.js' {
  const text: string;
  export default text;
}
declare module '*/uPlot.esm.js' {
  const text: string;
  export default text;
}
