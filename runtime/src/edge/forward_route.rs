//! Which device runs a call (spec edge.md §8 step 2), in this order: the explicit
//! `device` argument (a `device_id` or a unique name), else an opaque device ref
//! in a workspace/pane argument, else the only device with a live link.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value, json};

use super::forward_errors::Failure;
use super::link_hub_auth::DeviceInfo;

pub const MAX_DEVICE_SELECTOR: usize = 128;
pub const REF_PREFIX: &str = "herdr_ref_";
/// Arguments that may carry a device ref, and the id kind each accepts.
const REF_FIELDS: &[(&str, RefKind)] = &[
    ("workspace", RefKind::Workspace),
    ("workspace_id", RefKind::Workspace),
    ("pane", RefKind::Pane),
    ("pane_id", RefKind::Pane),
    ("target", RefKind::Either),
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RefKind {
    Workspace,
    Pane,
    Either,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub device: DeviceInfo,
    /// `explicit_device`, `device_ref`, `single_available_device`, or
    /// `automation_device` for a token bound to one device.
    pub reason: &'static str,
}

/// A device ref: `herdr_ref_` + base64url of `{"v":1,"d":device_id,"w"|"p":id}`.
pub fn make_ref(device_id: &str, workspace: Option<&str>, pane: Option<&str>) -> String {
    let mut body = json!({"v": 1, "d": device_id});
    if let Some(w) = workspace {
        body["w"] = json!(w);
    }
    if let Some(p) = pane {
        body["p"] = json!(p);
    }
    format!("{REF_PREFIX}{}", URL_SAFE_NO_PAD.encode(body.to_string()))
}

/// Rewrites, in place, every workspace or pane id found under a ref-carrying
/// key of a device's answer into a ref naming `device_id`, so a model that
/// passes it back reaches the same device without a `device` argument.
pub fn wrap_refs(v: &mut Value, device_id: &str) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                let is_ref_key = REF_FIELDS.iter().any(|(f, _)| f == k);
                match child {
                    Value::String(s) if is_ref_key && is_workspace_id(s) => *s = make_ref(device_id, Some(s), None),
                    Value::String(s) if is_ref_key && is_pane_id(s) => *s = make_ref(device_id, None, Some(s)),
                    _ => wrap_refs(child, device_id),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| wrap_refs(i, device_id)),
        _ => {}
    }
}

fn is_pane_id(p: &str) -> bool {
    p.split_once(':').is_some_and(|(w, p)| is_workspace_id(w) && p.len() > 1 && p.starts_with('p'))
}

/// (device_id, inner id, is_pane) of a ref, or why it is not one.
fn parse_ref(s: &str) -> Result<(String, String, bool), String> {
    let raw = s.strip_prefix(REF_PREFIX).ok_or("not a ref")?;
    let bytes = URL_SAFE_NO_PAD.decode(raw).map_err(|_| "device ref is not base64url".to_string())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| "device ref is not JSON".to_string())?;
    let obj = v.as_object().ok_or("device ref is not an object")?;
    if obj.get("v") != Some(&json!(1)) || obj.keys().any(|k| !matches!(k.as_str(), "v" | "d" | "w" | "p")) {
        return Err("device ref has an unknown version or field".into());
    }
    let d = obj.get("d").and_then(Value::as_str).ok_or("device ref names no device")?;
    match (obj.get("w").and_then(Value::as_str), obj.get("p").and_then(Value::as_str)) {
        (Some(w), None) if is_workspace_id(w) => Ok((d.into(), w.into(), false)),
        (None, Some(p)) if is_pane_id(p) => Ok((d.into(), p.into(), true)),
        _ => Err("device ref must carry exactly one workspace id or pane id".into()),
    }
}

fn is_workspace_id(w: &str) -> bool {
    w.len() > 1 && w.starts_with('w') && w[1..].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Takes the `device` selector out of `args` and unwraps refs in place; returns
/// the selector and the device the refs name (all refs must agree).
pub fn take_selectors(args: &mut Map<String, Value>) -> Result<(Option<String>, Option<String>), Failure> {
    let selector = match args.remove("device") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= MAX_DEVICE_SELECTOR => Some(s),
        Some(_) => {
            return Err(Failure::refused("invalid_params", format!("device must be a string of 1..={MAX_DEVICE_SELECTOR} characters")));
        }
    };
    let mut ref_device: Option<String> = None;
    for (field, kind) in REF_FIELDS {
        let Some(Value::String(s)) = args.get(*field) else { continue };
        if !s.starts_with(REF_PREFIX) {
            continue;
        }
        let (device, inner, is_pane) = parse_ref(s).map_err(|m| Failure::refused("invalid_params", format!("{field}: {m}")))?;
        let fits = match kind {
            RefKind::Workspace => !is_pane,
            RefKind::Pane => is_pane,
            RefKind::Either => true,
        };
        if !fits {
            return Err(Failure::refused("invalid_params", format!("{field} got a ref of the wrong kind")));
        }
        if ref_device.as_ref().is_some_and(|d| *d != device) {
            return Err(Failure::refused("device_ref_conflict", "the arguments carry refs of different devices"));
        }
        ref_device = Some(device);
        args.insert((*field).into(), Value::String(inner));
    }
    Ok((selector, ref_device))
}

fn usable(d: &DeviceInfo) -> Result<(), Failure> {
    match d.authorization.as_str() {
        "revoked" => Err(Failure::refused("device_revoked", format!("device {} was revoked", d.device_id))),
        "suspended" => Err(Failure::refused("device_suspended", format!("device {} is suspended", d.device_id))),
        "active" if d.scheduling != "enabled" => Err(Failure::refused("device_paused", format!("device {} is paused", d.device_id))),
        "active" => Ok(()),
        other => Err(Failure::refused("device_unavailable", format!("device {} is {other}", d.device_id))),
    }
}

/// Candidates named in a `device_ambiguous` answer at most.
pub const MAX_CANDIDATES: usize = 32;

/// Where routing looks devices up: indexed reads, none of which lists the
/// fleet (the edge's is [`super::forward::LinkRouter`]'s registry plus hub; a
/// slice of devices serves tests).
pub trait Directory {
    /// The device with this id, revoked included.
    fn by_id(&self, device_id: &str) -> Result<Option<DeviceInfo>, Failure>;
    /// Devices not revoked called `name` now.
    fn named(&self, name: &str) -> Result<Vec<DeviceInfo>, Failure>;
    /// Devices not revoked once called `name`.
    fn once_named(&self, name: &str) -> Result<Vec<DeviceInfo>, Failure>;
    /// Up to `limit` routable devices.
    fn routable(&self, limit: usize) -> Result<Vec<DeviceInfo>, Failure>;
    /// Up to `limit` routable devices that have a live link.
    fn live_routable(&self, limit: usize) -> Result<Vec<DeviceInfo>, Failure>;
}

/// A [`Directory`] over a list of devices and an `online` test.
pub struct Listed<'a, F> {
    pub devices: &'a [DeviceInfo],
    pub online: F,
}

impl<F: Fn(&str) -> bool> Directory for Listed<'_, F> {
    fn by_id(&self, device_id: &str) -> Result<Option<DeviceInfo>, Failure> {
        Ok(self.devices.iter().find(|d| d.device_id == device_id).cloned())
    }
    fn named(&self, name: &str) -> Result<Vec<DeviceInfo>, Failure> {
        Ok(self.devices.iter().filter(|d| d.authorization != "revoked" && d.name == name).cloned().collect())
    }
    fn once_named(&self, name: &str) -> Result<Vec<DeviceInfo>, Failure> {
        Ok(self.devices.iter().filter(|d| d.authorization != "revoked" && d.aliases.iter().any(|a| a == name)).cloned().collect())
    }
    fn routable(&self, limit: usize) -> Result<Vec<DeviceInfo>, Failure> {
        Ok(self.devices.iter().filter(|d| usable(d).is_ok()).take(limit).cloned().collect())
    }
    fn live_routable(&self, limit: usize) -> Result<Vec<DeviceInfo>, Failure> {
        Ok(self.devices.iter().filter(|d| usable(d).is_ok() && (self.online)(&d.workstation_id)).take(limit).cloned().collect())
    }
}

/// Resolves the route over a list of devices. `online` tells whether a
/// workstation has a live link.
pub fn resolve(
    devices: &[DeviceInfo],
    selector: Option<&str>,
    ref_device: Option<&str>,
    online: impl Fn(&str) -> bool,
) -> Result<Route, Failure> {
    resolve_in(&Listed { devices, online }, selector, ref_device)
}

/// Resolves the route with a few lookups in `dir`, whatever the fleet's size.
pub fn resolve_in(dir: &dyn Directory, selector: Option<&str>, ref_device: Option<&str>) -> Result<Route, Failure> {
    if let Some(sel) = selector {
        // An id, else a current name, else an earlier name (the model may still
        // use the one it saw before a rename); a current name always wins over
        // another device's old one.
        let mut matches: Vec<DeviceInfo> = dir.by_id(sel)?.into_iter().collect();
        if matches.is_empty() {
            matches = dir.named(sel)?;
        }
        if matches.is_empty() {
            matches = dir.once_named(sel)?;
        }
        let device = match matches.len() {
            0 => return Err(Failure::refused("device_not_found", format!("no device is called {sel:?}; see herdr_devices"))),
            1 => matches.pop().unwrap_or_else(|| unreachable!()),
            _ => {
                let ids: Vec<&str> = matches.iter().take(MAX_CANDIDATES).map(|d| d.device_id.as_str()).collect();
                return Err(Failure::refused("device_ambiguous", format!("several devices are called {sel:?}; pass a device_id"))
                    .with_details(json!({"candidates": ids})));
            }
        };
        if ref_device.is_some_and(|r| r != device.device_id) {
            return Err(Failure::refused("device_ref_conflict", "the device argument and the ref name different devices"));
        }
        usable(&device)?;
        return Ok(Route { device, reason: "explicit_device" });
    }
    if let Some(r) = ref_device {
        let device = dir
            .by_id(r)?
            .ok_or_else(|| Failure::refused("device_not_found", format!("the ref names device {r}, which is not enrolled")))?;
        usable(&device)?;
        return Ok(Route { device, reason: "device_ref" });
    }
    let mut live = dir.live_routable(MAX_CANDIDATES)?;
    if live.len() == 1 {
        return Ok(Route { device: live.remove(0), reason: "single_available_device" });
    }
    if live.len() > 1 {
        let ids: Vec<&str> = live.iter().map(|d| d.device_id.as_str()).collect();
        return Err(Failure::refused("device_ambiguous", "several devices are online; pass device (see herdr_devices)")
            .with_details(json!({"candidates": ids})));
    }
    let mut enrolled = dir.routable(2)?;
    match enrolled.len() {
        0 => Err(Failure::refused("device_not_found", "no device is enrolled with this edge")),
        // One enrolled device that is offline: name it, so the answer is "offline".
        1 => Ok(Route { device: enrolled.remove(0), reason: "single_available_device" }),
        _ => Err(Failure::new("workstation_offline", "no enrolled device has a live link", true, super::relay::DeliveryState::NotDelivered)),
    }
}

/// The route of an automation token bound to `bound` (spec §3: the grant is
/// bound to one device): that device whatever the arguments say; a selector or
/// ref naming any other is refused, never quietly redirected.
pub fn resolve_bound(
    devices: &[DeviceInfo],
    bound: &str,
    selector: Option<&str>,
    ref_device: Option<&str>,
    online: impl Fn(&str) -> bool,
) -> Result<Route, Failure> {
    resolve_bound_in(&Listed { devices, online }, bound, selector, ref_device)
}

/// [`resolve_bound`] with lookups in `dir`.
pub fn resolve_bound_in(dir: &dyn Directory, bound: &str, selector: Option<&str>, ref_device: Option<&str>) -> Result<Route, Failure> {
    let not_allowed = |what: &str| {
        Failure::refused("device_not_allowed", format!("this automation token may only reach device {bound}, not {what}"))
            .with_details(json!({"bound_device_id": bound}))
    };
    if let Some(r) = ref_device.filter(|r| *r != bound) {
        return Err(not_allowed(r));
    }
    match resolve_in(dir, Some(selector.unwrap_or(bound)), ref_device) {
        Ok(route) if route.device.device_id == bound => Ok(Route { reason: "automation_device", ..route }),
        Ok(route) => Err(not_allowed(&route.device.device_id)),
        // The bound device itself is gone or unusable: say so as for anyone.
        Err(e) if selector.is_none_or(|s| s == bound) => Err(e),
        Err(_) => Err(not_allowed(selector.unwrap_or_default())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(id: &str, name: &str, auth: &str) -> DeviceInfo {
        DeviceInfo { device_id: id.into(), workstation_id: id.into(), name: name.into(), aliases: Vec::new(), authorization: auth.into(), scheduling: "enabled".into(), credential_id: None, last_seen_ms: None }
    }

    #[test]
    fn explicit_then_ref_then_single() {
        let devs = vec![dev("dev_a", "laptop", "active"), dev("dev_b", "desk", "active"), dev("dev_c", "desk", "active"), dev("dev_r", "old", "revoked")];
        let all_online = |_: &str| true;
        assert_eq!(resolve(&devs, Some("dev_a"), None, all_online).unwrap().reason, "explicit_device");
        assert_eq!(resolve(&devs, Some("laptop"), None, all_online).unwrap().device.device_id, "dev_a");
        assert_eq!(resolve(&devs, Some("desk"), None, all_online).unwrap_err().code, "device_ambiguous");
        assert_eq!(resolve(&devs, Some("nope"), None, all_online).unwrap_err().code, "device_not_found");
        assert_eq!(resolve(&devs, Some("dev_r"), None, all_online).unwrap_err().code, "device_revoked");
        assert_eq!(resolve(&devs, Some("dev_a"), Some("dev_b"), all_online).unwrap_err().code, "device_ref_conflict");
        assert_eq!(resolve(&devs, None, Some("dev_b"), all_online).unwrap().reason, "device_ref");
        assert_eq!(resolve(&devs, None, None, all_online).unwrap_err().code, "device_ambiguous");
        let only_b = |w: &str| w == "dev_b";
        let r = resolve(&devs, None, None, only_b).unwrap();
        assert_eq!((r.device.device_id.as_str(), r.reason), ("dev_b", "single_available_device"));
        assert_eq!(resolve(&devs, None, None, |_: &str| false).unwrap_err().code, "workstation_offline");
        assert_eq!(resolve(&[], None, None, all_online).unwrap_err().code, "device_not_found");
        let mut paused = dev("dev_p", "p", "active");
        paused.scheduling = "paused".into();
        assert_eq!(resolve(&[paused], Some("dev_p"), None, all_online).unwrap_err().code, "device_paused");
        assert_eq!(resolve(&[dev("dev_s", "s", "suspended")], Some("s"), None, all_online).unwrap_err().code, "device_suspended");
    }

    #[test]
    fn a_bound_token_reaches_only_its_device() {
        let devs = vec![dev("dev_a", "laptop", "active"), dev("dev_b", "desk", "active"), dev("dev_r", "old", "revoked")];
        let on = |_: &str| true;
        let r = resolve_bound(&devs, "dev_a", None, None, on).unwrap();
        assert_eq!((r.device.device_id.as_str(), r.reason), ("dev_a", "automation_device"));
        assert_eq!(resolve_bound(&devs, "dev_a", Some("laptop"), None, on).unwrap().device.device_id, "dev_a");
        for other in ["dev_b", "desk", "nope", "old"] {
            assert_eq!(resolve_bound(&devs, "dev_a", Some(other), None, on).unwrap_err().code, "device_not_allowed", "{other}");
        }
        assert_eq!(resolve_bound(&devs, "dev_a", None, Some("dev_b"), on).unwrap_err().code, "device_not_allowed");
        assert_eq!(resolve_bound(&devs, "dev_r", None, None, on).unwrap_err().code, "device_revoked");
    }

    #[test]
    fn earlier_names_still_route_but_never_over_a_current_one() {
        let with_aliases = |id: &str, name: &str, aliases: &[&str], auth: &str| DeviceInfo {
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            ..dev(id, name, auth)
        };
        let all_online = |_: &str| true;
        let devs = vec![
            with_aliases("dev_a", "desk", &["laptop", "old-pc"], "active"),
            with_aliases("dev_b", "old-pc", &[], "active"),
            with_aliases("dev_c", "tower", &["shared"], "active"),
            with_aliases("dev_d", "server", &["shared"], "active"),
            with_aliases("dev_r", "gone", &["retired"], "revoked"),
        ];
        let r = resolve(&devs, Some("laptop"), None, all_online).unwrap();
        assert_eq!((r.device.device_id.as_str(), r.reason), ("dev_a", "explicit_device"));
        // dev_b is called old-pc now; dev_a only was.
        assert_eq!(resolve(&devs, Some("old-pc"), None, all_online).unwrap().device.device_id, "dev_b");
        let e = resolve(&devs, Some("shared"), None, all_online).unwrap_err();
        assert_eq!((e.code.as_str(), e.details.as_deref()), ("device_ambiguous", Some(&json!({"candidates": ["dev_c", "dev_d"]}))));
        assert_eq!(resolve(&devs, Some("retired"), None, all_online).unwrap_err().code, "device_not_found");
    }

    #[test]
    fn selectors_and_refs() {
        let mut args = serde_json::from_value::<Map<String, Value>>(json!({
            "device": "laptop",
            "workspace": make_ref("dev_a", Some("w1"), None),
            "pane_id": make_ref("dev_a", None, Some("w1:p2")),
            "path": "x",
        }))
        .unwrap();
        let (sel, r) = take_selectors(&mut args).unwrap();
        assert_eq!((sel.as_deref(), r.as_deref()), (Some("laptop"), Some("dev_a")));
        assert_eq!(Value::Object(args), json!({"workspace": "w1", "pane_id": "w1:p2", "path": "x"}));

        let conflict = json!({"workspace": make_ref("dev_a", Some("w1"), None), "target": make_ref("dev_b", Some("w2"), None)});
        assert_eq!(take_selectors(&mut serde_json::from_value(conflict).unwrap()).unwrap_err().code, "device_ref_conflict");
        let wrong_kind = json!({"workspace": make_ref("dev_a", None, Some("w1:p1"))});
        assert_eq!(take_selectors(&mut serde_json::from_value(wrong_kind).unwrap()).unwrap_err().code, "invalid_params");
        let garbage = json!({"pane": "herdr_ref_!!"});
        assert_eq!(take_selectors(&mut serde_json::from_value(garbage).unwrap()).unwrap_err().code, "invalid_params");
        for bad in [json!(7), json!(""), json!("x".repeat(MAX_DEVICE_SELECTOR + 1))] {
            let mut a = Map::new();
            a.insert("device".into(), bad);
            assert_eq!(take_selectors(&mut a).unwrap_err().code, "invalid_params");
        }
        // What the edge wraps in an answer, the next call unwraps.
        let mut answer = json!({"workspaces": [{"workspace": "w1", "panes": [{"pane_id": "w1:p3", "label": "w2"}]}], "target": "nope"});
        wrap_refs(&mut answer, "dev_a");
        let mut back: Map<String, Value> = serde_json::from_value(json!({"workspace": answer["workspaces"][0]["workspace"], "pane_id": answer["workspaces"][0]["panes"][0]["pane_id"]})).unwrap();
        assert_eq!(answer["workspaces"][0]["panes"][0]["label"], "w2", "only ref-carrying keys change");
        assert_eq!(answer["target"], "nope");
        assert_eq!(take_selectors(&mut back).unwrap().1.as_deref(), Some("dev_a"));
        assert_eq!(Value::Object(back), json!({"workspace": "w1", "pane_id": "w1:p3"}));

        let mut ok = Map::new();
        ok.insert("device".into(), json!("x".repeat(MAX_DEVICE_SELECTOR)));
        assert!(take_selectors(&mut ok).is_ok());
    }
}
