//! Generates the UCX bindings from the system headers found by pkg-config.
//!
//! `ucp_init` and a few helpers are `static inline` in `ucp.h`;
//! `ovbench-sys-build` compiles bindgen's shims for them.

fn main() {
    let lib = ovbench_sys_build::probe(
        "ucx",
        Some("1.10"),
        "install libucx-dev (Debian/Ubuntu) or ucx-devel",
    );
    // pkg-config `ucx` links ucs/uct/ucm; ucp is the one we call.
    println!("cargo:rustc-link-lib=ucp");
    println!("cargo:rustc-link-lib=ucs");
    ovbench_sys_build::Bindings {
        name: "ucx",
        header: "ucp/api/ucp.h",
        functions: &["uc[ps]_.*"],
        types: &["uc[ps]_.*"],
        vars: &["UC[PS]_.*", "UCP_API_.*"],
        derive_debug: false,
    }
    .generate(&[&lib]);
}
