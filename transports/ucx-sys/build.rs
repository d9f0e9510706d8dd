//! Generates the UCX bindings from the system headers found by pkg-config.
//!
//! `ucp_init` and a few helpers are `static inline` in `ucp.h`; bindgen's
//! `wrap_static_fns` emits C shims for them, compiled here with `cc`.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=build.rs");
    let lib = match pkg_config::Config::new().atleast_version("1.10").probe("ucx") {
        Ok(lib) => lib,
        Err(e) => panic!(
            "UCX not found by pkg-config ({e}); install libucx-dev (Debian/Ubuntu) or ucx-devel, or set PKG_CONFIG_PATH to UCX's lib/pkgconfig"
        ),
    };
    // pkg-config `ucx` links ucs/uct/ucm; ucp is the one we call.
    println!("cargo:rustc-link-lib=ucp");
    println!("cargo:rustc-link-lib=ucs");

    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR set by cargo"));
    let shims = out.join("ucx_static_fns");
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function("uc[ps]_.*")
        .allowlist_type("uc[ps]_.*")
        .allowlist_var("UC[PS]_.*")
        .allowlist_var("UCP_API_.*")
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .wrap_static_fns(true)
        .wrap_static_fns_path(&shims)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for p in &lib.include_paths {
        builder = builder.clang_arg(format!("-I{}", p.display()));
    }
    let bindings = builder
        .generate()
        .expect("bindgen failed on ucp/api/ucp.h; is libclang-dev installed?");
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");

    let mut cc = cc::Build::new();
    cc.file(shims.with_extension("c"))
        .include(env!("CARGO_MANIFEST_DIR"));
    for p in &lib.include_paths {
        cc.include(p);
    }
    cc.compile("ovbench_ucx_static_fns");
}
