//! Generates the libfabric bindings from the system headers found by
//! pkg-config. Almost every `fi_*` call is `static inline` (a jump through
//! the object's ops table); `ovbench-sys-build` compiles bindgen's shims
//! for them.

fn main() {
    let lib = ovbench_sys_build::probe(
        "libfabric",
        Some("1.10"),
        "install libfabric-dev (Debian/Ubuntu) or libfabric-devel",
    );
    ovbench_sys_build::Bindings {
        name: "ofi",
        header: "rdma/fabric.h",
        functions: &["fi_.*"],
        types: &["fi_.*|fid_.*|fid"],
        vars: &["FI_.*"],
        derive_debug: false,
    }
    .generate(&[&lib]);
}
