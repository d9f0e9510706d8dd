//! What `ovbench devices` lists for UCX: UCT's own resource queries —
//! every component (`uct_query_components`), its memory domains
//! (`uct_component_query`) and each domain's transports and devices
//! (`uct_md_query_tl_resources`) — and the library's version. No context
//! or worker is made: the queries open each memory domain and close it.

use std::ffi::CStr;
use std::ptr;

use ovbench_ucx_sys as sys;

/// One transport on one device, under its memory domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportResource {
    pub component: String,
    pub memory_domain: String,
    pub transport: String,
    pub device: String,
    /// `net`, `shm`, `acc`, `self`.
    pub device_type: &'static str,
}

/// A fixed-size C name array as text.
fn name(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn device_type(t: sys::uct_device_type_t) -> &'static str {
    match t {
        sys::UCT_DEVICE_TYPE_NET => "net",
        sys::UCT_DEVICE_TYPE_SHM => "shm",
        sys::UCT_DEVICE_TYPE_ACC => "acc",
        sys::UCT_DEVICE_TYPE_SELF => "self",
        _ => "other",
    }
}

fn status_text(s: sys::ucs_status_t) -> String {
    // SAFETY: ucs_status_string returns a static string for any status.
    unsafe { CStr::from_ptr(sys::ucs_status_string(s)) }
        .to_string_lossy()
        .into_owned()
}

/// Every transport resource of every memory domain; an error names the
/// call that failed.
pub fn transports() -> Result<Vec<TransportResource>, String> {
    let mut comps: *mut sys::uct_component_h = ptr::null_mut();
    let mut ncomp: libc::c_uint = 0;
    // SAFETY: out-pointers valid; the list is released below.
    let st = unsafe { sys::uct_query_components(&mut comps, &mut ncomp) };
    if st != sys::UCS_OK {
        return Err(format!("uct_query_components: {}", status_text(st)));
    }
    let mut out = Vec::new();
    for i in 0..ncomp as usize {
        // SAFETY: i < ncomp, so comps[i] is a component handle of the list.
        let comp = unsafe { *comps.add(i) };
        out.extend(component_transports(comp));
    }
    // SAFETY: the list came from uct_query_components and is released once.
    unsafe { sys::uct_release_component_list(comps) };
    Ok(out)
}

/// The transports of one component's memory domains (a domain that does
/// not open is left out: its hardware is absent).
fn component_transports(comp: sys::uct_component_h) -> Vec<TransportResource> {
    let mut attr = sys::uct_component_attr_t {
        field_mask: u64::from(sys::UCT_COMPONENT_ATTR_FIELD_NAME)
            | u64::from(sys::UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT),
        ..Default::default()
    };
    // SAFETY: attr is valid with the fields the mask names.
    if unsafe { sys::uct_component_query(comp, &mut attr) } != sys::UCS_OK {
        return Vec::new();
    }
    let comp_name = name(&attr.name);
    let mut mds: Vec<sys::uct_md_resource_desc_t> =
        vec![Default::default(); attr.md_resource_count as usize];
    attr.field_mask = u64::from(sys::UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES);
    attr.md_resources = mds.as_mut_ptr();
    // SAFETY: md_resources has room for md_resource_count entries.
    if unsafe { sys::uct_component_query(comp, &mut attr) } != sys::UCS_OK {
        return Vec::new();
    }
    let mut out = Vec::new();
    for md_desc in &mds {
        let md_name = name(&md_desc.md_name);
        let mut config: *mut sys::uct_md_config_t = ptr::null_mut();
        // SAFETY: NULL env prefix and file name read the defaults; config is released below.
        if unsafe { sys::uct_md_config_read(comp, ptr::null(), ptr::null(), &mut config) }
            != sys::UCS_OK
        {
            continue;
        }
        let mut md: sys::uct_md_h = ptr::null_mut();
        // SAFETY: md_name is NUL-terminated inside the descriptor; config is valid.
        let st = unsafe { sys::uct_md_open(comp, md_desc.md_name.as_ptr(), config, &mut md) };
        // SAFETY: config came from uct_md_config_read and is released once.
        unsafe { sys::uct_config_release(config.cast()) };
        if st != sys::UCS_OK {
            continue;
        }
        let mut res: *mut sys::uct_tl_resource_desc_t = ptr::null_mut();
        let mut n: libc::c_uint = 0;
        // SAFETY: md is open; res receives a list released below.
        if unsafe { sys::uct_md_query_tl_resources(md, &mut res, &mut n) } == sys::UCS_OK {
            for j in 0..n as usize {
                // SAFETY: j < n, an entry of the returned list.
                let r = unsafe { &*res.add(j) };
                out.push(TransportResource {
                    component: comp_name.clone(),
                    memory_domain: md_name.clone(),
                    transport: name(&r.tl_name),
                    device: name(&r.dev_name),
                    device_type: device_type(r.dev_type),
                });
            }
            // SAFETY: the list came from uct_md_query_tl_resources, released once.
            unsafe { sys::uct_release_tl_resource_list(res) };
        }
        // SAFETY: md was opened above and is closed once.
        unsafe { sys::uct_md_close(md) };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_shared_memory_and_self_transports() {
        // Every UCX build has the self and posix (or sysv) transports.
        let t = transports().expect("uct queries");
        assert!(t.iter().any(|r| r.transport == "self"), "{t:?}");
        assert!(t.iter().any(|r| r.device_type == "shm"), "{t:?}");
    }
}
