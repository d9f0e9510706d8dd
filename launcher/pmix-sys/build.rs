//! Generates the PMIx client bindings from the system headers found by
//! pkg-config (Debian's libpmix-dev installs them under pmix2/).

fn main() {
    let lib = ovbench_sys_build::probe(
        "pmix",
        Some("3.0"),
        "install libpmix-dev (Debian/Ubuntu) or pmix-devel",
    );
    ovbench_sys_build::Bindings {
        name: "pmix",
        header: "pmix.h",
        functions: &[
            "PMIx_Init",
            "PMIx_Finalize",
            "PMIx_Initialized",
            "PMIx_Put",
            "PMIx_Commit",
            "PMIx_Fence",
            "PMIx_Get",
            "PMIx_Error_string",
            "PMIx_Info_load",
            "PMIx_Value_destruct",
            "PMIx_Get_version",
        ],
        types: &["pmix_.*"],
        vars: &["PMIX_.*"],
        derive_debug: false,
    }
    .generate(&[&lib]);
}
