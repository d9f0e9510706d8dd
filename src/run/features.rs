//! Which transports this binary was built with. A transport that is not
//! compiled in is an error naming the cargo feature and the Debian
//! packages to install (DESIGN.md § Layout, Features).

use anyhow::{bail, Result};

use crate::cli::common::TransportKind;

/// The cargo feature and the system packages a transport needs.
pub fn requirement(kind: TransportKind) -> (&'static str, &'static str) {
    match kind {
        TransportKind::Tcp => ("tcp", "nothing beyond the standard library"),
        TransportKind::Sim => ("sim", "nothing beyond the standard library"),
        TransportKind::Verbs => ("verbs", "libibverbs-dev librdmacm-dev"),
        TransportKind::Ucx => ("ucx", "libucx-dev"),
        TransportKind::Ofi => ("ofi", "libfabric-dev"),
        TransportKind::Mpi => ("mpi", "libopenmpi-dev (or libmpich-dev) and openmpi-bin"),
    }
}

/// Why `--transport mpi` cannot run in any build yet: the `mpi` feature
/// exists so the flag and the docs are stable, but transports/mpi has not
/// been written (no issue covers it so far), so `full` leaves it out.
pub const MPI_NOT_YET: &str = "the mpi transport is not part of this build yet: its crate (transports/mpi, an MPI library through rsmpi) has not been written, so no ovbench build can start it, with or without --features mpi (the feature is a placeholder and --features full leaves it out). Run the same methods over --transport tcp, verbs, ucx or ofi, or --proto native over ucx or ofi for a library's own tagged protocol";

/// Whether the transport's feature was enabled at build time (and the
/// transport exists: `mpi` never is, see [`MPI_NOT_YET`]).
pub fn compiled_in(kind: TransportKind) -> bool {
    match kind {
        TransportKind::Tcp => cfg!(feature = "tcp"),
        TransportKind::Sim => cfg!(feature = "sim"),
        TransportKind::Verbs => cfg!(feature = "verbs"),
        TransportKind::Ucx => cfg!(feature = "ucx"),
        TransportKind::Ofi => cfg!(feature = "ofi"),
        TransportKind::Mpi => false,
    }
}

/// The transports this binary can run.
pub fn available() -> Vec<TransportKind> {
    use TransportKind::*;
    [Tcp, Sim, Verbs, Ucx, Ofi, Mpi]
        .into_iter()
        .filter(|k| compiled_in(*k))
        .collect()
}

/// An error unless `kind` is usable in this binary.
pub fn check(kind: TransportKind) -> Result<()> {
    if compiled_in(kind) {
        return Ok(());
    }
    if kind == TransportKind::Mpi {
        bail!("{MPI_NOT_YET}");
    }
    let (feature, packages) = requirement(kind);
    let have: Vec<&str> = available().iter().map(|k| k.name()).collect();
    bail!(
        "the {kind} transport is not compiled into this ovbench: rebuild with --features {feature} (e.g. cargo build --release --features {feature}); it needs {packages} (ci/deps installs them). This binary has: {}",
        have.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_build_has_tcp_and_sim() {
        assert!(check(TransportKind::Tcp).is_ok());
        assert!(check(TransportKind::Sim).is_ok());
    }

    #[test]
    fn missing_transport_names_feature_and_package() {
        if compiled_in(TransportKind::Verbs) {
            return; // built with --features verbs: nothing missing to report
        }
        let e = check(TransportKind::Verbs).unwrap_err().to_string();
        assert!(e.contains("--features verbs"), "{e}");
        assert!(e.contains("libibverbs-dev librdmacm-dev"), "{e}");
        assert!(e.contains("tcp"), "{e}");
    }

    #[test]
    fn mpi_says_it_is_not_in_any_build_yet() {
        assert!(!compiled_in(TransportKind::Mpi));
        assert!(!available().contains(&TransportKind::Mpi));
        let e = check(TransportKind::Mpi).unwrap_err().to_string();
        assert!(e.contains("not part of this build yet"), "{e}");
        assert!(e.contains("transports/mpi"), "{e}");
        assert!(!e.contains("rebuild with"), "{e}");
    }

    #[test]
    fn fabric_features_are_reported_as_built() {
        assert_eq!(compiled_in(TransportKind::Verbs), cfg!(feature = "verbs"));
        assert_eq!(compiled_in(TransportKind::Ucx), cfg!(feature = "ucx"));
        assert_eq!(compiled_in(TransportKind::Ofi), cfg!(feature = "ofi"));
    }
}
