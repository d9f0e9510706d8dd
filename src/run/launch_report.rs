//! What the header says about how the job was launched: who started the
//! ranks, which channel exchanged their addresses (PMIx, PMI-2 or the
//! bootstrap service), where the transport listens, and whose CPU
//! binding the ranks run under.

use ovbench_launcher::route::Reach;
use ovbench_launcher::{Exchange, JobSource, RankEnv};
use serde_json::{json, Value};

/// The binding rank 0 runs under, in words.
fn binding(env: &RankEnv) -> String {
    let list = |c: &[usize]| c.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    match (&env.launcher_binding, env.cpu) {
        (Some(b), _) => format!(
            "kept from {} (rank 0 bound to cpu {}); ovbench does not pin again",
            env.launcher_name(),
            list(b)
        ),
        (None, Some(c)) => format!("pinned by ovbench (rank 0 on cpu {c})"),
        (None, None) if env.source == JobSource::Launcher => {
            "none (--launcher's ranks unpinned)".into()
        }
        (None, None) => format!("none: {} did not bind the ranks", env.launcher_name()),
    }
}

/// Adds the launch facts to rank 0's header (JSON, and lines unless the
/// command asked for none).
pub fn add(header: &mut (Value, Vec<String>), env: &RankEnv, ex: &dyn Exchange, reach: &Reach) {
    let (json, lines) = header;
    let launcher = if env.source == JobSource::Launcher {
        if std::env::var_os("OVBENCH_SECRET_STDIN").is_some() {
            "ovbench over ssh"
        } else {
            "ovbench (local)"
        }
    } else {
        env.launcher_name()
    };
    let listen = match reach {
        Reach::Loopback => "127.0.0.1 (lo: every rank on this host)".to_string(),
        Reach::Interface { name, addr } => format!("{addr} ({name}, the route to the other hosts)"),
    };
    let bind = binding(env);
    json["launch"] = json!({
        "launcher": launcher,
        "exchange": ex.kind().name(),
        "exchange_detail": ex.describe(),
        "listen": listen,
        "binding": bind,
        "oversubscribed": env.oversubscribed(0),
    });
    if !lines.is_empty() {
        lines.push(format!(
            "launch: {launcher}; addresses exchanged through {}",
            ex.describe()
        ));
        lines.push(format!(
            "transport listens on {listen}; CPU binding: {bind}"
        ));
    }
}
