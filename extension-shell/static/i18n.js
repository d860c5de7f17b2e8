// Page texts in the browser's language (chrome.i18n, _locales/<lang>/messages.json; English when
// a text has no translation). `data-i18n` replaces an element's text, `data-i18n-label` its
// aria-label; `t(key, ...subs)` is for texts built in scripts.

export function t(key, ...subs) {
  return chrome.i18n.getMessage(key, subs.map(String)) || key;
}

export function localize(root = document) {
  document.documentElement.lang = chrome.i18n.getUILanguage();
  for (const node of root.querySelectorAll('[data-i18n]')) node.textContent = t(node.dataset.i18n);
  for (const node of root.querySelectorAll('[data-i18n-label]')) node.setAttribute('aria-label', t(node.dataset.i18nLabel));
}
