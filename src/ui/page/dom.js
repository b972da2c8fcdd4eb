// The live page's DOM helpers (loaded before page.js): nodes built from data — every name from a
// cluster or a client goes in as text, never as markup — and sections updated in place.
'use strict';

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null) continue;
    if (key === 'class') node.className = value;
    else if (key.startsWith('data-')) node.setAttribute(key, String(value));
    else node[key] = value;
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const td = (text, cls) => el('td', { class: cls }, text ?? '');
const badge = (text, cls) => el('span', { class: `badge ${cls || text}` }, text);

/**
 * Puts `fresh` into `holder`, keeping each node already there that differs only in its text: the
 * page draws again every second, and new nodes took away the reader's text selection and the
 * keyboard focus (a copy button, a row) each time.
 */
function patchChildren(holder, fresh) {
  const old = [...holder.childNodes];
  fresh.forEach((node, i) => {
    if (!old[i]) holder.append(node);
    else if (!patch(old[i], node)) old[i].replaceWith(node);
  });
  for (const extra of old.slice(fresh.length)) extra.remove();
}

/** Makes `was` show what `now` shows, in place, when both have the same tag, attributes and number of children. */
function patch(was, now) {
  if (was.nodeType !== now.nodeType) return false;
  if (was.nodeType === Node.TEXT_NODE) {
    if (was.nodeValue !== now.nodeValue) was.nodeValue = now.nodeValue;
    return true;
  }
  if (was.nodeName !== now.nodeName || was.childNodes.length !== now.childNodes.length) return false;
  const names = was.getAttributeNames();
  if (names.length !== now.getAttributeNames().length || names.some((n) => was.getAttribute(n) !== now.getAttribute(n))) return false;
  [...now.childNodes].forEach((child, i) => {
    if (!patch(was.childNodes[i], child)) was.childNodes[i].replaceWith(child);
  });
  return true;
}
