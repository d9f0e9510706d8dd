//! Which transports this binary was built with. A transport that is not
//! compiled in is an error naming the cargo feature and the Debian
//! packages to install (docs/architecture.md § Conventions).

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
        TransportKind::Mpi => ("mpi", "libopenmpi-dev openmpi-bin (or MPICH, README § MPI)"),
    }
}

/// Whether the transport's feature was enabled at build time.
pub fn compiled_in(kind: TransportKind) -> bool {
    match kind {
        TransportKind::Tcp => cfg!(feature = "tcp"),
        TransportKind::Sim => cfg!(feature = "sim"),
        TransportKind::Verbs => cfg!(feature = "verbs"),
        TransportKind::Ucx => cfg!(feature = "ucx"),
        TransportKind::Ofi => cfg!(feature = "ofi"),
        TransportKind::Mpi => cfg!(feature = "mpi"),
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
    let (feature, packages) = requirement(kind);
    let have: Vec<&str> = available().iter().map(|k| k.name()).collect();
    bail!(
        "--transport {kind}: the {kind} transport is not compiled into this ovbench: rebuild with --features {feature} (e.g. cargo build --release --features {feature}); it needs {packages} (ci/deps installs them). This binary has: {}",
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
    fn mpi_without_its_feature_names_the_feature_and_mpirun_packages() {
        if compiled_in(TransportKind::Mpi) {
            return;
        }
        let e = check(TransportKind::Mpi).unwrap_err().to_string();
        assert!(
            e.contains("--features mpi") && e.contains("libopenmpi-dev"),
            "{e}"
        );
    }

    #[test]
    fn fabric_features_are_reported_as_built() {
        assert_eq!(compiled_in(TransportKind::Verbs), cfg!(feature = "verbs"));
        assert_eq!(compiled_in(TransportKind::Ucx), cfg!(feature = "ucx"));
        assert_eq!(compiled_in(TransportKind::Ofi), cfg!(feature = "ofi"));
        assert_eq!(compiled_in(TransportKind::Mpi), cfg!(feature = "mpi"));
    }
}
