//! Versions of the communication libraries installed here (rdma-core,
//! UCX, libfabric, MPI), found at run time through pkg-config or dpkg,
//! best effort: a missing tool or library is simply left out.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Each library: display name, pkg-config modules, Debian packages.
const LIBRARIES: &[(&str, &[&str], &[&str])] = &[
    ("rdma-core", &["libibverbs"], &["rdma-core", "libibverbs1"]),
    ("UCX", &["ucx"], &["libucx0", "ucx-utils"]),
    ("libfabric", &["libfabric"], &["libfabric1"]),
    (
        "Open MPI",
        &["ompi"],
        &["openmpi-bin", "libopenmpi3t64", "libopenmpi3"],
    ),
    ("MPICH", &["mpich"], &["mpich", "libmpich12"]),
];

/// Run a short query with a deadline; its trimmed stdout on success.
fn query(program: &str, args: &[&str]) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

/// Library name → version (and where it was found).
pub fn library_versions() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, pc, debs) in LIBRARIES {
        let from_pc = pc.iter().find_map(|m| {
            query("pkg-config", &["--modversion", m]).map(|v| format!("{v} (pkg-config {m})"))
        });
        let found = from_pc.or_else(|| {
            debs.iter().find_map(|d| {
                query("dpkg-query", &["-W", "-f=${Status} ${Version}", d]).and_then(|s| {
                    s.strip_prefix("install ok installed ")
                        .map(|v| format!("{v} (dpkg {d})"))
                })
            })
        });
        if let Some(v) = found {
            out.insert(name.to_string(), v);
        }
    }
    out
}

/// `UCX_*`, `FI_*`, `OMPI_MCA_*`, `PMIX_MCA_*`, `MPIR_CVAR_*` and `HYDRA_*`
/// variables of this process's environment as the user
/// gave them: the first call takes the snapshot, and `main` makes it
/// before any transport exists, since transports may set some themselves
/// (the ofi transport's `FI_UNIVERSE_SIZE`) and say so in their own lines.
pub fn fabric_env() -> BTreeMap<String, String> {
    static AT_START: OnceLock<BTreeMap<String, String>> = OnceLock::new();
    AT_START
        .get_or_init(|| {
            std::env::vars()
                .filter(|(k, _)| is_user_setting(k))
                .collect()
        })
        .clone()
}

/// Prefixes of the libraries' settings recorded in the header: UCX,
/// libfabric, Open MPI (and its PMIx), MPICH and its Hydra launcher.
const SETTING_PREFIXES: &[&str] = &[
    "UCX_",
    "FI_",
    "OMPI_MCA_",
    "PMIX_MCA_",
    "MPIR_CVAR_",
    "HYDRA_",
];

/// What mpirun (ORTE) itself puts in every rank's environment: the job's
/// wiring, not the user's settings (and `orte_precondition_transports`
/// is a job secret).
const LAUNCHER_SET: &[&str] = &[
    "OMPI_MCA_orte_",
    "OMPI_MCA_ess",
    "OMPI_MCA_pmix",
    "OMPI_MCA_initial_wdir",
    "OMPI_MCA_shmem_RUNTIME_QUERY_hint",
    "OMPI_MCA_mpi_oversubscribe",
    "OMPI_MCA_rmaps_base_oversubscribe",
    "PMIX_MCA_mca_base_component_show_load_errors",
];

/// Whether variable `k` is a library setting the user made.
fn is_user_setting(k: &str) -> bool {
    SETTING_PREFIXES.iter().any(|p| k.starts_with(p))
        && !LAUNCHER_SET.iter().any(|p| k.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpi_settings_are_recorded_and_mpiruns_own_wiring_is_not() {
        for k in [
            "OMPI_MCA_osc",
            "OMPI_MCA_btl",
            "MPIR_CVAR_CH4_NETMOD",
            "HYDRA_TOPO_DEBUG",
            "PMIX_MCA_gds",
            "UCX_TLS",
            "FI_PROVIDER",
        ] {
            assert!(is_user_setting(k), "{k}");
        }
        for k in [
            "OMPI_MCA_orte_hnp_uri",
            "OMPI_MCA_orte_precondition_transports",
            "OMPI_MCA_ess_base_vpid",
            "OMPI_COMM_WORLD_RANK",
            "PATH",
        ] {
            assert!(!is_user_setting(k), "{k}");
        }
    }

    #[test]
    fn queries_have_a_deadline_and_tolerate_absence() {
        assert_eq!(query("/nonexistent/tool", &[]), None);
        assert_eq!(query("sh", &["-c", "echo 1.2.3"]).as_deref(), Some("1.2.3"));
        let t = Instant::now();
        assert_eq!(query("sleep", &["10"]), None);
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn library_scan_finishes() {
        // Whatever is installed, every entry is one of the known names.
        for k in library_versions().keys() {
            assert!(LIBRARIES.iter().any(|(n, _, _)| n == k), "{k}");
        }
    }
}
