//! What `ovbench devices` lists for libfabric: every provider, fabric and
//! domain `fi_getinfo` offers this machine (no hints: all of them), with
//! the endpoint types and whether RMA is among the capabilities.

use std::ptr;

use ovbench_ofi_sys as sys;

use super::fabric::cstr;

/// One (provider, fabric, domain) that `fi_getinfo` reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderInfo {
    pub provider: String,
    pub fabric: String,
    pub domain: String,
    /// `rdm`, `msg`, `dgram` as reported, in the library's order.
    pub endpoint_types: Vec<&'static str>,
    pub rma: bool,
}

fn ep_type_name(t: sys::fi_ep_type) -> &'static str {
    match t {
        sys::FI_EP_RDM => "rdm",
        sys::FI_EP_MSG => "msg",
        sys::FI_EP_DGRAM => "dgram",
        _ => "other",
    }
}

/// Every provider entry, merged by (provider, fabric, domain); the
/// libfabric code when the call fails (`-FI_ENODATA`: none at all).
pub fn providers() -> Result<Vec<ProviderInfo>, i32> {
    let mut info: *mut sys::fi_info = ptr::null_mut();
    // SAFETY: NULL node, service and hints ask for everything; `info`
    // receives a list freed below.
    let rc = unsafe {
        sys::fi_getinfo(
            sys::fi_version_of(1, 10),
            ptr::null(),
            ptr::null(),
            0,
            ptr::null_mut(),
            &mut info,
        )
    };
    if rc != 0 {
        return Err(rc);
    }
    let mut out: Vec<ProviderInfo> = Vec::new();
    let mut cur = info;
    while !cur.is_null() {
        // SAFETY: `cur` is an entry of the list fi_getinfo returned; its
        // attribute pointers are valid while the list lives.
        let (provider, fabric, domain, ep, caps, next) = unsafe {
            let i = &*cur;
            (
                cstr((*i.fabric_attr).prov_name),
                cstr((*i.fabric_attr).name),
                cstr((*i.domain_attr).name),
                ep_type_name((*i.ep_attr).type_),
                i.caps,
                i.next,
            )
        };
        let rma = caps & u64::from(sys::FI_RMA) != 0;
        match out
            .iter_mut()
            .find(|p| p.provider == provider && p.fabric == fabric && p.domain == domain)
        {
            Some(p) => {
                if !p.endpoint_types.contains(&ep) {
                    p.endpoint_types.push(ep);
                }
                p.rma |= rma;
            }
            None => out.push(ProviderInfo {
                provider,
                fabric,
                domain,
                endpoint_types: vec![ep],
                rma,
            }),
        }
        cur = next;
    }
    if !info.is_null() {
        // SAFETY: the list came from fi_getinfo and is freed once.
        unsafe { sys::fi_freeinfo(info) };
    }
    Ok(out)
}

/// The library's version as `major.minor`.
pub fn library_version() -> String {
    let v = super::fabric::version();
    format!("{}.{}", v >> 16, v & 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_providers_with_their_endpoint_types() {
        // libfabric ships tcp, udp, shm and sockets on Debian: at least one.
        let p = providers().expect("fi_getinfo");
        assert!(!p.is_empty());
        assert!(p
            .iter()
            .all(|x| !x.provider.is_empty() && !x.endpoint_types.is_empty()));
        assert!(library_version().starts_with('1'), "{}", library_version());
    }
}
