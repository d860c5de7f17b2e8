//! Which Herdr methods only look and which change something, for `herdr_call` in
//! read-only mode (`HERDR_MCP_READONLY=1`).
//!
//! Herdr's schema lists each method and its parameters but not whether it changes
//! anything, so the reading methods are named here, from the method list of Herdr
//! 0.8.2 (spec/herdr.md §3). The list fails closed: a method not named here — a
//! new one, an unknown one, one whose name does not say (`pane.layout`) — counts
//! as a mutation. A method named here counts as reading only while the live schema
//! knows it (the caller checks the schema first), so a future Herdr that reused a
//! name for something else would still be looked at through that schema.
//!
//! Moving focus, typing into a pane, prompting or renaming an agent, reporting
//! metadata and every create/close/move are mutations: they change what the user
//! sees or what runs on the machine.

/// Herdr methods that read state and change nothing.
const READING: &[&str] = &[
    "ping",
    "server.agent_manifests",
    "session.snapshot",
    "workspace.list",
    "workspace.get",
    "worktree.list",
    "tab.list",
    "tab.get",
    "pane.list",
    "pane.current",
    "pane.get",
    "pane.read",
    "pane.process_info",
    "pane.neighbor",
    "pane.edges",
    "pane.graphics.info",
    "pane.wait_for_output",
    "layout.export",
    "agent.list",
    "agent.get",
    "agent.read",
    "agent.explain",
    "agent.wait",
    "events.subscribe",
    "events.wait",
    "plugin.list",
    "plugin.action.list",
    "plugin.log.list",
];

/// What a Herdr method does to the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodAccess {
    Read,
    /// Changes something, or is not known to be harmless.
    Mutate,
}

/// Classifies `method` (the exact wire name); anything not listed as reading is a
/// mutation.
pub fn classify(method: &str) -> MethodAccess {
    if READING.contains(&method) { MethodAccess::Read } else { MethodAccess::Mutate }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_methods_read_and_everything_else_mutates() {
        for m in ["pane.read", "pane.list", "agent.get", "session.snapshot", "events.wait", "ping"] {
            assert_eq!(classify(m), MethodAccess::Read, "{m}");
        }
        for m in [
            "pane.send_text",
            "pane.send_keys",
            "pane.send_input",
            "agent.prompt",
            "agent.send_keys",
            "agent.rename",
            "agent.start",
            "pane.close",
            "pane.focus",
            "pane.layout",
            "workspace.create",
            "server.stop",
            "plugin.action.invoke",
            "PANE.READ",
            "pane.read ",
            "something.new",
            "",
        ] {
            assert_eq!(classify(m), MethodAccess::Mutate, "{m:?}");
        }
    }
}
