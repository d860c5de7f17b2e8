//! `herdr-mcp device revoke|suspend|resume <dev_id> --confirm`: the operator's
//! device switches, run on the edge host. Like the `connector` commands they open
//! the edge's state directory directly, so they work without any enrolled device
//! and while `edge serve` runs; the server notices the change within
//! [`super::link_hub_watch::WATCH_EVERY`] and closes the device's link (4401).

use super::cli::{StateDirArg, open_store, whoami};
use super::devices::{Device, DeviceRegistry};

#[derive(clap::Args, Debug)]
pub struct AdminArgs {
    /// The device's immutable id (dev_…), as `device list` shows it
    pub device_id: String,
    /// Required: confirms the change to a device that may be linked right now
    #[arg(long)]
    pub confirm: bool,
    #[command(flatten)]
    pub state: StateDirArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminAction {
    Revoke,
    Suspend,
    Resume,
}

impl AdminAction {
    fn verb(self) -> &'static str {
        match self {
            Self::Revoke => "revoke",
            Self::Suspend => "suspend",
            Self::Resume => "resume",
        }
    }
}

fn describe(d: &Device) -> String {
    format!("{} ({:?}) is now {}", d.device_id, d.name, d.authorization)
}

pub fn run_admin(action: AdminAction, args: AdminArgs) -> anyhow::Result<()> {
    if !args.confirm {
        let why = match action {
            AdminAction::Revoke => "revocation cannot be undone",
            AdminAction::Suspend => "suspending closes the device's link",
            AdminAction::Resume => "resuming lets the device link again",
        };
        anyhow::bail!("{why}; run `herdr-mcp device {} {} --confirm`", action.verb(), args.device_id);
    }
    let registry = DeviceRegistry::new(open_store(&args.state.resolve()?)?);
    let by = format!("operator:{}", whoami());
    let result = match action {
        AdminAction::Revoke => registry.revoke(&args.device_id, &by),
        AdminAction::Suspend => registry.suspend(&args.device_id, &by),
        AdminAction::Resume => registry.resume(&args.device_id, &by),
    };
    let device = result.map_err(|e| anyhow::anyhow!("cannot {} {} ({}): {e}", action.verb(), args.device_id, e.code()))?;
    println!("{}", describe(&device));
    Ok(())
}
