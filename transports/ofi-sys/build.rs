//! Generates the libfabric bindings from the system headers found by
//! pkg-config. Almost every `fi_*` call is `static inline` (a jump through
//! the object's ops table); bindgen's `wrap_static_fns` emits C shims for
//! them, compiled here with `cc`.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=build.rs");
    let lib = match pkg_config::Config::new().atleast_version("1.10").probe("libfabric") {
        Ok(lib) => lib,
        Err(e) => panic!(
            "libfabric not found by pkg-config ({e}); install libfabric-dev (Debian/Ubuntu) or libfabric-devel, or set PKG_CONFIG_PATH"
        ),
    };
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR set by cargo"));
    let shims = out.join("ofi_static_fns");
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function("fi_.*")
        .allowlist_type("fi_.*|fid_.*|fid")
        .allowlist_var("FI_.*")
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
        .expect("bindgen failed on rdma/fabric.h; is libclang-dev installed?");
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");

    let mut cc = cc::Build::new();
    cc.file(shims.with_extension("c"))
        .include(env!("CARGO_MANIFEST_DIR"))
        .warnings(false);
    for p in &lib.include_paths {
        cc.include(p);
    }
    cc.compile("ovbench_ofi_static_fns");
}
