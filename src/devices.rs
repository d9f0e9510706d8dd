//! `ovbench devices`: the transports compiled in and, for each, what this
//! machine offers it, from the libraries' own query calls in this process
//! (verbs: `ibv_get_device_list`, `ibv_query_port`, `ibv_query_gid`; UCX:
//! UCT's component, memory-domain and transport queries; libfabric:
//! `fi_getinfo`), with a hint of what to install or load where nothing is
//! found; then the launchers this machine has (mpirun, srun, PMIx).

use anyhow::Result;

use crate::cli::common::TransportKind;
use crate::run::features::{compiled_in, requirement};

/// `ovbench devices`'s options (none yet).
#[derive(Clone, Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  ovbench devices                 # what each compiled-in transport finds here\n  ovbench --version               # the transports compiled in"
)]
pub struct DevicesArgs {}

/// What one transport finds: lines to print, and a hint when nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Section {
    pub name: &'static str,
    pub status: String,
    pub lines: Vec<String>,
    pub hint: Option<String>,
}

/// Every transport's section, in `--transport`'s order.
pub fn sections() -> Vec<Section> {
    use TransportKind::*;
    [Tcp, Sim, Verbs, Ucx, Ofi, Mpi]
        .into_iter()
        .map(|k| {
            if compiled_in(k) {
                probe(k)
            } else {
                let (feature, packages) = requirement(k);
                Section {
                    name: k.name(),
                    status: "not compiled in".into(),
                    lines: Vec::new(),
                    hint: Some(format!(
                        "rebuild with --features {feature} (it needs {packages}; ci/deps installs them)"
                    )),
                }
            }
        })
        .collect()
}

fn probe(k: TransportKind) -> Section {
    let mut s = Section {
        name: k.name(),
        status: "compiled in".into(),
        ..Section::default()
    };
    match k {
        TransportKind::Tcp => s
            .lines
            .push("TCP sockets; local ranks connect over loopback 127.0.0.1".into()),
        TransportKind::Sim => s
            .lines
            .push("the LogGP model: all ranks in one process on virtual time".into()),
        TransportKind::Verbs => verbs(&mut s),
        TransportKind::Ucx => ucx(&mut s),
        TransportKind::Ofi => ofi(&mut s),
        TransportKind::Mpi => mpi(&mut s),
    }
    s
}

#[cfg(feature = "verbs")]
fn verbs(s: &mut Section) {
    match ovbench_verbs::inventory::devices() {
        Err(e) => s.lines.push(format!("ibv_get_device_list failed: {e}")),
        Ok(devs) if devs.is_empty() => {
            s.hint = Some("no RDMA device: load a driver, or make a soft-RoCE one (modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IFACE), with ibverbs-providers installed".into());
        }
        Ok(devs) => {
            for d in devs {
                match d.ports {
                    Err(e) => s.lines.push(format!("{}: cannot open: {e}", d.name)),
                    Ok(ports) => {
                        s.lines
                            .push(format!("{} (firmware {})", d.name, d.firmware));
                        for p in ports {
                            s.lines.push(format!(
                                "  port {}: {}, MTU {}, {}",
                                p.port, p.state, p.mtu, p.link_layer
                            ));
                            for g in p.gids {
                                let kind = if g.kind.is_empty() {
                                    String::new()
                                } else {
                                    format!(" ({})", g.kind)
                                };
                                s.lines
                                    .push(format!("    GID[{}] {}{kind}", g.index, g.gid));
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(not(feature = "verbs"))]
fn verbs(_: &mut Section) {}

#[cfg(feature = "ucx")]
fn ucx(s: &mut Section) {
    s.status = format!("compiled in, UCX {}", ovbench_ucx::library_version());
    match ovbench_ucx::resources() {
        Err(e) => s.lines.push(e),
        Ok(res) => {
            let mut by_tl: Vec<(String, Vec<String>)> = Vec::new();
            for r in res {
                let dev = format!("{} ({})", r.device, r.device_type);
                match by_tl.iter_mut().find(|(t, _)| *t == r.transport) {
                    Some((_, devs)) if !devs.contains(&dev) => devs.push(dev),
                    Some(_) => {}
                    None => by_tl.push((r.transport, vec![dev])),
                }
            }
            for (tl, devs) in &by_tl {
                s.lines.push(format!("{tl}: {}", devs.join(", ")));
            }
            if !by_tl
                .iter()
                .any(|(_, d)| d.iter().any(|x| x.contains("(net)")))
            {
                s.hint = Some("no network transport: UCX sees no NIC it can use (install ucx's IB/RoCE modules, or use --ucx-tls posix for shared memory)".into());
            }
        }
    }
}

#[cfg(not(feature = "ucx"))]
fn ucx(_: &mut Section) {}

/// A libfabric domain and the fabrics (networks) it reaches.
#[cfg(feature = "ofi")]
type Domain = (String, Vec<String>);

#[cfg(feature = "ofi")]
fn ofi(s: &mut Section) {
    s.status = format!("compiled in, libfabric {}", ovbench_ofi::library_version());
    match ovbench_ofi::providers() {
        Err(code) => {
            s.lines
                .push(format!("fi_getinfo found no provider (code {code})"));
            s.hint = Some(
                "install libfabric's providers (libfabric1 on Debian), or check FI_PROVIDER".into(),
            );
        }
        Ok(list) => {
            // One line per provider: its endpoint types, and each domain
            // with the fabrics (networks) it reaches.
            let mut lines: Vec<(String, Vec<Domain>)> = Vec::new();
            for p in list {
                let head = format!(
                    "{}: endpoints {}{}",
                    p.provider,
                    p.endpoint_types.join("/"),
                    if p.rma { ", RMA" } else { "" }
                );
                let i = match lines.iter().position(|(h, _)| *h == head) {
                    Some(i) => i,
                    None => {
                        lines.push((head, Vec::new()));
                        lines.len() - 1
                    }
                };
                let domains = &mut lines[i].1;
                match domains.iter_mut().find(|(d, _)| *d == p.domain) {
                    Some((_, f)) => f.push(p.fabric),
                    None => domains.push((p.domain, vec![p.fabric])),
                }
            }
            for (head, domains) in lines {
                let d: Vec<String> = domains
                    .iter()
                    .map(|(d, f)| format!("{d} ({})", f.join(", ")))
                    .collect();
                s.lines.push(format!("{head}; domains {}", d.join(", ")));
            }
        }
    }
}

#[cfg(not(feature = "ofi"))]
fn ofi(_: &mut Section) {}

/// The MPI library this binary is linked against (`MPI_Get_library_version`,
/// callable before `MPI_Init`); ranks come from mpirun or srun.
#[cfg(feature = "mpi")]
fn mpi(s: &mut Section) {
    s.lines.push(ovbench_mpi::library_version());
    s.lines
        .push("ranks come from the job: mpirun -np N ovbench CMD --transport mpi".into());
}

#[cfg(not(feature = "mpi"))]
fn mpi(_: &mut Section) {}

/// Where `program` is on PATH.
fn on_path(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|f| f.is_file())
    })
}

/// The launchers: mpirun and srun on PATH, the PMIx library.
pub fn launchers() -> Vec<String> {
    let mut out = Vec::new();
    for p in ["mpirun", "srun"] {
        out.push(match on_path(p) {
            Some(f) => format!("{p}: {}", f.display()),
            None => format!("{p}: not found on PATH"),
        });
    }
    let pmix = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
    ]
    .iter()
    .flat_map(|d| ["libpmix.so.2", "libpmix.so"].map(|f| std::path::Path::new(d).join(f)))
    .find(|f| f.exists());
    out.push(match pmix {
        Some(f) => format!("PMIx: {}", f.display()),
        None => "PMIx: no libpmix found (install libpmix2 for PMIx-launched jobs)".into(),
    });
    out
}

/// The transports compiled in, for `--version`.
pub fn compiled_transports() -> String {
    crate::run::features::available()
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Print the listing.
pub fn run(_: &DevicesArgs) -> Result<i32> {
    println!(
        "# ovbench {}: transports compiled in: {}",
        env!("CARGO_PKG_VERSION"),
        compiled_transports()
    );
    for s in sections() {
        println!("{:<6} {}", s.name, s.status);
        for l in &s.lines {
            println!("       {l}");
        }
        if let Some(h) = &s.hint {
            println!("       hint: {h}");
        }
    }
    println!("launchers");
    for l in launchers() {
        println!("       {l}");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_transport_has_a_section_and_missing_ones_a_hint() {
        let s = sections();
        let names: Vec<&str> = s.iter().map(|x| x.name).collect();
        assert_eq!(names, ["tcp", "sim", "verbs", "ucx", "ofi", "mpi"]);
        for x in &s {
            if x.status == "not compiled in" {
                assert!(x.hint.as_deref().is_some_and(|h| !h.is_empty()), "{x:?}");
            }
        }
    }
}
