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
    // uct: the resource queries `ovbench devices` lists transports with.
    println!("cargo:rustc-link-lib=uct");
    ovbench_sys_build::Bindings {
        name: "ucx",
        header: "ucp/api/ucp.h",
        functions: &[
            "uc[ps]_.*",
            "uct_(query_components|release_component_list|component_query|md_config_read|config_release|md_open|md_close|md_query_tl_resources|release_tl_resource_list)",
        ],
        types: &["uc[ps]_.*", "uct_component_attr.*", "uct_tl_resource_desc.*", "uct_device_type.*"],
        vars: &["UC[PS]_.*", "UCP_API_.*", "UCT_COMPONENT_ATTR_FIELD_.*", "UCT_DEVICE_TYPE_.*"],
        derive_debug: false,
    }
    .generate(&[&lib]);
}
