// Text put into HTML by any door's page: the five characters that could end an attribute or start
// markup are written as character references.
export const escapeHtml = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
