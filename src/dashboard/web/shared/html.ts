import htm from 'htm';
import { h } from 'preact';

// Preact through htm's tagged templates: no build step for the markup, and everything shown is text
// content, never parsed as HTML, so that names and errors cannot inject markup.
export const html = htm.bind(h);
export type Markup = ReturnType<typeof html> | null;

// An element the page's layout always holds (layout.html, sign-in.html).
export const $ = <E extends Element = HTMLElement>(selector: string): E => document.querySelector<E>(selector)!;

// The page being shown, as the server named it on <body data-page>.
export const PAGE = document.body.dataset.page;

// The value of a form's field, by its name.
export const valueOf = (form: HTMLFormElement, name: string) => (form.elements.namedItem(name) as HTMLInputElement | HTMLTextAreaElement).value;
