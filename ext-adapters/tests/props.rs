//! Property tests: identity never panics and is stable under re-keying; messages round-trip.

use ext_adapters::identify;
use ext_adapters::messages::{
    decode_content, ComposerSnapshot, ContentMessage, Envelope, PageSnapshot, RootSnapshot,
};
use proptest::prelude::*;

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("c".to_owned()),
        Just("g".to_owned()),
        Just("a".to_owned()),
        Just("chat".to_owned()),
        Just("s".to_owned()),
        Just("project".to_owned()),
        Just("g-p-0123456789abcdef0123456789abcdef".to_owned()),
        Just("g-p-0123456789abcdef0123456789abcdef-some-slug".to_owned()),
        "[a-zA-Z0-9%._~-]{1,12}",
    ]
}

fn page_url() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just("chat.z.ai"), Just("chat.deepseek.com"), Just("chatgpt.com"), Just("www.chatgpt.com")],
        prop::collection::vec(segment(), 0..6),
        any::<bool>(),
        prop::option::of("[a-z=&0-9]{0,8}"),
    )
        .prop_map(|(host, segs, slash, query)| {
            let mut url = format!("https://{host}/{}", segs.join("/"));
            if slash {
                url.push('/');
            }
            if let Some(q) = query {
                url.push('?');
                url.push_str(&q);
            }
            url
        })
}

proptest! {
    #[test]
    fn identify_never_panics_on_any_string(s in "\\PC{0,80}") {
        let _ = identify(&s);
        let _ = identify(&format!("https://{s}"));
    }

    #[test]
    fn the_key_of_a_page_identifies_the_same_conversation(url in page_url()) {
        let id = identify(&url).unwrap();
        prop_assert!(!id.conv_key.ends_with('/'), "{}", id.conv_key);
        prop_assert!(!id.conv_key.contains('?'));
        let again = identify(&id.conv_key).unwrap();
        prop_assert_eq!(&again, &id, "{}", url);
    }

    #[test]
    fn snapshots_round_trip_through_the_wire_format(
        texts in prop::collection::vec(("\\PC{0,40}", prop::collection::vec("[a-z]{1,9}", 0..3), any::<bool>()), 0..6),
        url in page_url(),
        seq in any::<u64>(),
    ) {
        let roots: Vec<RootSnapshot> = texts.into_iter().enumerate().map(|(i, (text, probes, cut))| RootSnapshot {
            index: i as u32, dom_id: cut.then(|| format!("message-{i}")), probes, head: text.chars().take(5).collect(),
            text, text_truncated: cut, folded: None, rev: None, delta: None, held: false,
        }).collect();
        let snap = PageSnapshot {
            seq, url, visible: true, total_roots: roots.len() as u32, roots,
            composer: ComposerSnapshot { present: false, kind: None, text: String::new(), composing: false, disabled: false },
            send_button: None,
        };
        let msg = ContentMessage::Snapshot(snap);
        let wire = serde_json::to_string(&Envelope::new(msg.clone())).unwrap();
        prop_assert_eq!(decode_content(&wire).unwrap(), msg);
    }
}
