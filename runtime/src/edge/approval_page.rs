//! The HTML shown while an authorization waits for the operator: the request id,
//! the 6-digit code, when it expires and the exact command to run, what is asking
//! (client name and id, redirect URI, resource, when, from which address and user
//! agent: the same facts `connector approve` prints, so the operator can tell this
//! request from a stranger's), plus a small script that polls `/oauth/authorize/poll` and follows the redirect once approved.
//!
//! Served with `Content-Security-Policy: default-src 'none'` and a per-response
//! nonce for the one inline script and style, `X-Frame-Options: DENY` (no
//! clickjacking of a page that carries a code) and `Cache-Control: no-store`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use super::authorize::{POLL_INTERVAL_MS, Requester};
use super::connectors_table::format_ms;
use super::secrets::random_b64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    En,
    Zh,
    Ja,
}

impl Lang {
    /// Highest-weighted supported language of an `Accept-Language` header, else English.
    pub fn from_accept_language(header: Option<&str>) -> Lang {
        let mut best: Option<(f32, usize, Lang)> = None;
        for (i, part) in header.unwrap_or("").split(',').enumerate() {
            let mut it = part.trim().split(';');
            let tag = it.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = it
                .find_map(|p| p.trim().strip_prefix("q=").and_then(|v| v.parse::<f32>().ok()))
                .unwrap_or(1.0);
            let primary = tag.split('-').next().unwrap_or("");
            let lang = match primary {
                "en" => Lang::En,
                "zh" => Lang::Zh,
                "ja" => Lang::Ja,
                _ => continue,
            };
            if q > 0.0 && best.is_none_or(|(bq, bi, _)| q > bq || (q == bq && i < bi)) {
                best = Some((q, i, lang));
            }
        }
        best.map(|(_, _, l)| l).unwrap_or(Lang::En)
    }

    fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh",
            Lang::Ja => "ja",
        }
    }
}

struct Texts {
    title: &'static str,
    intro: &'static str,
    code_label: &'static str,
    run_label: &'static str,
    expires: &'static str,
    waiting: &'static str,
    approved: &'static str,
    failed: &'static str,
    dup_title: &'static str,
    dup_body: &'static str,
    details: &'static str,
}

fn texts(lang: Lang) -> Texts {
    match lang {
        Lang::En => Texts {
            title: "Approve this connection on your computer",
            intro: "An application asked to use herdr-mcp. Nothing is allowed until you approve it from a terminal on a machine you control.",
            code_label: "Approval code",
            run_label: "Run this command, then type the code when it asks:",
            expires: "This request expires in",
            waiting: "Waiting for approval…",
            approved: "Approved. Returning to the application…",
            failed: "This request can no longer be approved:",
            dup_title: "Approval already pending",
            dup_body: "The same request is already waiting for approval in another tab. Finish it there, or try again once it has expired.",
            details: "Approve only if you started this connection yourself. This request:",
        },
        Lang::Zh => Texts {
            title: "请在您的电脑上批准此连接",
            intro: "有应用请求使用 herdr-mcp。在您于自己掌控的机器终端中批准之前，它不会获得任何权限。",
            code_label: "批准码",
            run_label: "运行以下命令，并在提示时输入批准码：",
            expires: "此请求的剩余有效时间",
            waiting: "正在等待批准…",
            approved: "已批准，正在返回应用…",
            failed: "此请求已无法批准：",
            dup_title: "已有相同的请求在等待批准",
            dup_body: "同一个请求已在另一个标签页中等待批准。请在那里完成，或在其过期后重试。",
            details: "仅当此连接是您本人发起时才批准。此请求：",
        },
        Lang::Ja => Texts {
            title: "お使いのコンピューターでこの接続を承認してください",
            intro: "アプリケーションが herdr-mcp の利用を求めています。ご自身が管理するマシンのターミナルで承認するまで、何も許可されません。",
            code_label: "承認コード",
            run_label: "次のコマンドを実行し、求められたらコードを入力してください：",
            expires: "このリクエストの有効期限まで",
            waiting: "承認を待っています…",
            approved: "承認されました。アプリケーションに戻ります…",
            failed: "このリクエストはもう承認できません：",
            dup_title: "同じリクエストが承認待ちです",
            dup_body: "同じリクエストが別のタブで承認を待っています。そちらで完了するか、期限切れ後にもう一度お試しください。",
            details: "ご自身で開始した接続の場合のみ承認してください。このリクエスト：",
        },
    }
}

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A JSON string literal safe inside `<script>` (no `</script>` breakout).
fn js_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()).replace('<', "\\u003c").replace('>', "\\u003e")
}

pub struct PageInput<'a> {
    pub request_id: &'a str,
    pub code: &'a str,
    pub resume_token: &'a str,
    pub expires_at_ms: i64,
    pub now_ms: i64,
    pub client_name: Option<&'a str>,
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub resource: &'a str,
    pub created_at_ms: i64,
    pub requester: &'a Requester,
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}\
code,.code{font-family:ui-monospace,monospace}.code{font-size:2.4rem;letter-spacing:.3rem;font-weight:700}\
pre{background:#f3f3f3;padding:.8rem;overflow-x:auto}#status{margin-top:1.5rem;font-weight:600}";

fn secure(mut resp: Response, nonce: &str) -> Response {
    let h = resp.headers_mut();
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    );
    if let Ok(v) = HeaderValue::from_str(&csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    resp
}

pub fn pending(lang: Lang, p: &PageInput<'_>) -> Response {
    let t = texts(lang);
    let nonce = random_b64::<16>();
    let secs = ((p.expires_at_ms - p.now_ms) / 1000).max(0);
    let command = format!("herdr-mcp connector approve {}", p.request_id);
    let html = format!(
        r#"<!doctype html><html lang="{lang}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{title}</title><style nonce="{nonce}">{STYLE}</style></head><body>
<h1>{title}</h1><p>{intro}</p>
<p>{code_label}:</p><p class="code" id="code">{code}</p>
<p>{run_label}</p><pre><code id="command">{command}</code></pre>
<p>{details}</p><dl id="request">
<dt>client</dt><dd id="client">{client_name} (<code>{client_id}</code>)</dd>
<dt>redirect_uri</dt><dd id="redirect-uri"><code>{redirect_uri}</code></dd>
<dt>resource</dt><dd id="resource"><code>{resource}</code></dd>
<dt>requested</dt><dd id="requested-at">{requested_at}</dd>
<dt>from</dt><dd id="requester"><code>{requester_addr}</code> — <span id="user-agent">{user_agent}</span></dd>
</dl>
<p>{expires} <span id="expires" data-expires-at-ms="{expires_at}">{mins}:{rem:02}</span></p>
<p id="request-id">request_id: <code>{request_id}</code></p>
<p id="status">{waiting}</p>
<script nonce="{nonce}">
(function () {{
  var requestId = {rid_js}, resume = {resume_js}, deadline = Date.now() + {total} * 1000;
  var statusEl = document.getElementById("status"), expEl = document.getElementById("expires");
  function tick() {{
    var left = Math.max(0, Math.round((deadline - Date.now()) / 1000));
    expEl.textContent = Math.floor(left / 60) + ":" + String(left % 60).padStart(2, "0");
  }}
  function poll() {{
    var url = "/oauth/authorize/poll?request_id=" + encodeURIComponent(requestId) + "&resume_token=" + encodeURIComponent(resume);
    fetch(url, {{ cache: "no-store", credentials: "omit" }}).then(function (r) {{ return r.json(); }}).then(function (b) {{
      if (b.status === "pending") {{ setTimeout(poll, {interval}); return; }}
      if (b.status === "approved" && b.redirect) {{ statusEl.textContent = {approved_js}; window.location.replace(b.redirect); return; }}
      statusEl.textContent = {failed_js} + " " + (b.message || b.code || "");
    }}).catch(function () {{ setTimeout(poll, {interval}); }});
  }}
  setInterval(tick, 1000); tick(); setTimeout(poll, {interval});
}})();
</script></body></html>"#,
        lang = lang.tag(),
        title = escape(t.title),
        intro = escape(t.intro),
        code_label = escape(t.code_label),
        code = escape(p.code),
        run_label = escape(t.run_label),
        command = escape(&command),
        expires = escape(t.expires),
        expires_at = p.expires_at_ms,
        mins = secs / 60,
        rem = secs % 60,
        total = secs,
        request_id = escape(p.request_id),
        details = escape(t.details),
        client_name = escape(p.client_name.unwrap_or("(unnamed)")),
        client_id = escape(p.client_id),
        redirect_uri = escape(p.redirect_uri),
        resource = escape(p.resource),
        requested_at = escape(&format_ms(Some(p.created_at_ms))),
        requester_addr = escape(&p.requester.addr_text()),
        user_agent = escape(p.requester.user_agent.as_deref().unwrap_or("(no user agent)")),
        waiting = escape(t.waiting),
        rid_js = js_string(p.request_id),
        resume_js = js_string(p.resume_token),
        approved_js = js_string(t.approved),
        failed_js = js_string(t.failed),
        interval = POLL_INTERVAL_MS,
    );
    secure(Html(html).into_response(), &nonce)
}

/// "Already pending": a retry of an identical request. The code is not shown again
/// (only its HMAC is kept), so the page points back to the first tab.
pub fn duplicate(lang: Lang, request_id: &str, retry_after_secs: i64) -> Response {
    let t = texts(lang);
    let nonce = random_b64::<16>();
    let html = format!(
        r#"<!doctype html><html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title><style nonce="{nonce}">{STYLE}</style></head>
<body><h1>{title}</h1><p>{body}</p><p id="request-id">request_id: <code>{rid}</code></p><p><code>duplicate_pending</code></p></body></html>"#,
        lang = lang.tag(),
        title = escape(t.dup_title),
        body = escape(t.dup_body),
        rid = escape(request_id),
    );
    let mut resp = (StatusCode::CONFLICT, Html(html)).into_response();
    if let Ok(v) = HeaderValue::from_str(&retry_after_secs.to_string()) {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    secure(resp, &nonce)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_language_picks_by_weight() {
        assert_eq!(Lang::from_accept_language(None), Lang::En);
        assert_eq!(Lang::from_accept_language(Some("zh-CN,zh;q=0.9,en;q=0.8")), Lang::Zh);
        assert_eq!(Lang::from_accept_language(Some("fr-FR, ja;q=0.7, en;q=0.5")), Lang::Ja);
        assert_eq!(Lang::from_accept_language(Some("en;q=0.4, ja;q=0.6")), Lang::Ja);
        assert_eq!(Lang::from_accept_language(Some("de, ja;q=0")), Lang::En);
    }

    #[test]
    fn escape_blocks_markup() {
        assert_eq!(escape("<a href=\"x\">'&"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;");
        assert!(!js_string("</script>").contains("</"));
    }
}
