//! `herdr-mcp edge automation create|list|rotate|revoke`: the operator's automation
//! clients (spec edge.md §5), run on the edge host. Like `device revoke` they open
//! the edge's state directory directly, so they work while `edge serve` runs and
//! the server sees each change on its next request.

use std::fmt::Write;

use super::automation::{self, AutomationClient, Issued};
use super::cli::{StateDirArg, open_store, whoami};
use super::connectors_table::format_ms;

#[derive(clap::Subcommand, Debug)]
pub enum AutomationCommand {
    /// Create an automation client bound to one device; prints its client_id and
    /// secret (the secret only this once).
    Create {
        /// A name to recognise the client by, 1 to 64 characters
        #[arg(long)]
        name: String,
        /// The one device its tokens may reach: its device_id or unique name
        #[arg(long, value_name = "ID|NAME")]
        device: String,
        #[command(flatten)]
        state: StateDirArg,
    },
    /// List automation clients (id, name, device, status, created, live tokens);
    /// never their secrets.
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateDirArg,
    },
    /// Replace a client's secret: the old one and its tokens stop working at once.
    Rotate {
        /// The automation client (svc_…), as `automation list` shows it
        client_id: String,
        /// Required: the old secret stops working at once
        #[arg(long)]
        confirm: bool,
        #[command(flatten)]
        state: StateDirArg,
    },
    /// Revoke a client: its secret and tokens stop working on the next request.
    Revoke {
        /// The automation client (svc_…), as `automation list` shows it
        client_id: String,
        /// Required: revocation cannot be undone
        #[arg(long)]
        confirm: bool,
        #[command(flatten)]
        state: StateDirArg,
    },
}

fn print_secret(verb: &str, issued: &Issued) {
    let c = &issued.client;
    println!(
        "{verb} automation client {:?} bound to device {}",
        c.name, c.device_id
    );
    println!("client_id: {}", c.client_id);
    println!("client_secret: {}", issued.client_secret);
    println!("The secret is shown only now; store it where the automation runs.");
    println!(
        "It trades them for a 1-hour access token: POST <issuer>/oauth/token with grant_type=client_credentials, client_id, client_secret and resource=<issuer>/mcp."
    );
}

fn table(clients: &[AutomationClient]) -> String {
    if clients.is_empty() {
        return "no automation clients; create one with `herdr-mcp edge automation create --name NAME --device ID`\n".into();
    }
    let mut out = format!(
        "{:<36} {:<20} {:<31} {:<8} {:<25} {}\n",
        "CLIENT", "NAME", "DEVICE", "STATUS", "CREATED", "TOKENS"
    );
    for c in clients {
        let _ = writeln!(
            out,
            "{:<36} {:<20} {:<31} {:<8} {:<25} {}",
            c.client_id,
            c.name,
            c.device_id,
            c.status,
            format_ms(Some(c.created_at_ms)),
            c.active_access_tokens
        );
    }
    out
}

pub fn run_automation(cmd: AutomationCommand) -> anyhow::Result<()> {
    match cmd {
        AutomationCommand::Create {
            name,
            device,
            state,
        } => {
            let store = open_store(&state.resolve()?)?;
            let issued = automation::create(&store, &name, &device)
                .map_err(|e| anyhow::anyhow!("cannot create the automation client: {e}"))?;
            print_secret("created", &issued);
        }
        AutomationCommand::List { json, state } => {
            let store = open_store(&state.resolve()?)?;
            let clients = automation::list(&store)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &serde_json::json!({"ok": true, "automation_clients": clients})
                    )?
                );
            } else {
                print!("{}", table(&clients));
            }
        }
        AutomationCommand::Rotate {
            client_id,
            confirm,
            state,
        } => {
            if !confirm {
                anyhow::bail!(
                    "rotating replaces the secret and the old one stops working at once; run `herdr-mcp edge automation rotate {client_id} --confirm`"
                );
            }
            let store = open_store(&state.resolve()?)?;
            let issued = automation::rotate(&store, &client_id)
                .map_err(|e| anyhow::anyhow!("cannot rotate {client_id}: {e}"))?;
            print_secret("rotated the secret of", &issued);
        }
        AutomationCommand::Revoke {
            client_id,
            confirm,
            state,
        } => {
            if !confirm {
                anyhow::bail!(
                    "revocation cannot be undone; run `herdr-mcp edge automation revoke {client_id} --confirm`"
                );
            }
            let store = open_store(&state.resolve()?)?;
            let by = format!("operator:{}", whoami());
            let deleted = automation::revoke(&store, &client_id, &by)
                .map_err(|e| anyhow::anyhow!("cannot revoke {client_id}: {e}"))?;
            println!(
                "revoked {client_id}: its secret no longer works and {deleted} live access token(s) were deleted"
            );
        }
    }
    Ok(())
}
