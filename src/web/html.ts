// Text put into HTML by any door's page: the four characters that could end a (double-quoted, as
// all of ours are) attribute or start markup are written as character references.
export const escapeHtml = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
