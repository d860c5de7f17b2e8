//! Test-only stand-in for the content script: builds a `PageSnapshot` from static HTML by
//! applying a site's `SelectorSet` exactly as documented in `ext_adapters::selectors`.
//!
//! Two browser facts a static parser cannot know are approximated: `:disabled` (scraper has
//! no state pseudo-classes) is read as the `disabled` attribute, and every element counts as
//! visible unless it or an ancestor has the `hidden` attribute.

use ext_adapters::messages::{ButtonSnapshot, ComposerKind, ComposerSnapshot, PageSnapshot, RootSnapshot};
use ext_adapters::selectors::SelectorSet;
use scraper::{ElementRef, Html, Selector};
use std::collections::HashSet;

pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading fixture {path}: {e}"))
}

/// Parses a selector the way the browser would, with the `:disabled` approximation.
pub fn css(selector: &str) -> Selector {
    let shimmed = selector.replace(":disabled", "[disabled]");
    Selector::parse(&shimmed).unwrap_or_else(|e| panic!("selector {selector:?} does not parse: {e:?}"))
}

fn text_content(el: ElementRef<'_>) -> String {
    el.text().collect()
}

/// The line text of `el` (see `ext_adapters::selectors`, "Line text"). A static parser has no
/// CSS, so only `<pre>` (and `<textarea>`) count as laying text out as written.
fn line_text(el: ElementRef<'_>, tags: &[String]) -> String {
    fn walk(node: ElementRef<'_>, tags: &[String], pre: bool, out: &mut String, pending: &mut bool) {
        for child in node.children() {
            match child.value() {
                scraper::Node::Text(t) => {
                    let data: &str = t;
                    if data.is_empty() || (!pre && data.trim().is_empty() && data.contains('\n')) {
                        continue;
                    }
                    if *pending && !out.is_empty() && !out.ends_with('\n') {
                        out.push('\n');
                    }
                    *pending = false;
                    out.push_str(data);
                }
                scraper::Node::Element(e) => {
                    let tag = e.name().to_ascii_uppercase();
                    if tag == "BR" {
                        if *pending && !out.is_empty() && !out.ends_with('\n') {
                            out.push('\n');
                        }
                        *pending = false;
                        out.push('\n');
                        continue;
                    }
                    if ["SCRIPT", "STYLE", "TEMPLATE", "NOSCRIPT"].contains(&tag.as_str()) {
                        continue;
                    }
                    let block = tags.contains(&tag);
                    *pending |= block;
                    if let Some(child) = ElementRef::wrap(child) {
                        walk(child, tags, pre || tag == "PRE" || tag == "TEXTAREA", out, pending);
                    }
                    *pending |= block;
                }
                _ => {}
            }
        }
    }
    let (mut out, mut pending) = (String::new(), false);
    walk(el, tags, false, &mut out, &mut pending);
    out
}

fn first_chars(s: &str, n: usize) -> (String, bool) {
    match s.char_indices().nth(n) {
        Some((i, _)) => (s[..i].to_owned(), true),
        None => (s.to_owned(), false),
    }
}

/// The last match of `content` inside `root` that is not nested in another match.
fn content_element<'a>(root: ElementRef<'a>, content: &Selector) -> Option<ElementRef<'a>> {
    let matches: Vec<ElementRef<'a>> = root.select(content).collect();
    let ids: HashSet<_> = matches.iter().map(|m| m.id()).collect();
    matches
        .into_iter()
        .filter(|m| {
            m.ancestors().take_while(|a| a.id() != root.id()).all(|a| !ids.contains(&a.id()))
        })
        .last()
}

pub fn snapshot(html: &str, url: &str, selectors: &SelectorSet) -> PageSnapshot {
    let doc = Html::parse_document(html);
    let all_roots: Vec<ElementRef<'_>> = doc.select(&css(&selectors.message_root)).collect();
    let total = all_roots.len();
    let first = total.saturating_sub(selectors.max_roots as usize);
    let content = css(&selectors.content);
    let probes: Vec<(String, Selector)> =
        selectors.probes.iter().map(|p| (p.name.clone(), css(&p.selector))).collect();
    let roots = all_roots[first..]
        .iter()
        .enumerate()
        .map(|(offset, root)| {
            let index = first + offset;
            let source = content_element(*root, &content).unwrap_or(*root);
            let full = line_text(source, &selectors.line_break_tags).trim().to_owned();
            let (text, text_truncated) = if index + 1 == total {
                (full, false)
            } else {
                first_chars(&full, selectors.history_text_chars as usize)
            };
            let root_text = text_content(*root);
            let (head, _) = first_chars(root_text.trim_start(), selectors.head_chars as usize);
            RootSnapshot {
                index: index as u32,
                dom_id: root.value().attr("id").map(str::to_owned),
                probes: probes
                    .iter()
                    .filter(|(_, sel)| sel.matches(root) || root.select(sel).next().is_some())
                    .map(|(name, _)| name.clone())
                    .collect(),
                text,
                text_truncated,
                rev: None,
                delta: None,
                held: false,
                head,
                folded: root
                    .value()
                    .attr("data-h2w-folded")
                    .and_then(|l| serde_json::from_value(serde_json::Value::String(l.to_owned())).ok()),
            }
        })
        .collect();
    PageSnapshot {
        seq: 1,
        url: url.to_owned(),
        visible: true,
        total_roots: total as u32,
        roots,
        composer: composer(&doc, selectors),
        send_button: send_button(&doc, selectors),
    }
}

fn composer(doc: &Html, selectors: &SelectorSet) -> ComposerSnapshot {
    let Some(el) = selectors.composer.iter().find_map(|s| doc.select(&css(s)).next()) else {
        return ComposerSnapshot { present: false, kind: None, text: String::new(), composing: false, disabled: false };
    };
    let kind = if el.value().name() == "textarea" {
        ComposerKind::Textarea
    } else if el.value().attr("contenteditable") == Some("true") {
        ComposerKind::ContentEditable
    } else {
        ComposerKind::Other
    };
    ComposerSnapshot {
        present: true,
        kind: Some(kind),
        text: text_content(el).replace('\u{200b}', "").trim().to_owned(),
        composing: false,
        disabled: el.value().attr("disabled").is_some(),
    }
}

fn send_button(doc: &Html, selectors: &SelectorSet) -> Option<ButtonSnapshot> {
    selectors.send_buttons.iter().enumerate().find_map(|(i, s)| {
        doc.select(&css(s)).next().map(|el| ButtonSnapshot {
            candidate: i as u32,
            enabled: el.value().attr("disabled").is_none(),
            visible: el.ancestors().filter_map(ElementRef::wrap).all(|a| a.value().attr("hidden").is_none())
                && el.value().attr("hidden").is_none(),
        })
    })
}
