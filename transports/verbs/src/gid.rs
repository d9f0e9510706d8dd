//! Choosing the GID index the way perftest users expect: on RoCE the
//! RoCE v2 entry holding an IPv4-mapped address, read from sysfs in one
//! pass (no process per file).

use std::path::Path;

/// One populated GID table entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GidEntry {
    pub index: u32,
    /// As sysfs prints it: eight colon-separated groups of four hex digits.
    pub gid: String,
    /// `RoCE v2`, `IB/RoCE v1`, or empty when sysfs has no type.
    pub kind: String,
}

fn is_ipv4_mapped(gid: &str) -> bool {
    gid.starts_with("0000:0000:0000:0000:0000:ffff:")
}

fn is_link_local(gid: &str) -> bool {
    gid.starts_with("fe80:")
}

/// The preferred entry: RoCE v2 IPv4-mapped, then RoCE v2 global IPv6,
/// then any RoCE v2, then the lowest index.
pub fn choose(entries: &[GidEntry]) -> Option<u32> {
    let v2 = |e: &&GidEntry| e.kind.contains("v2");
    entries
        .iter()
        .filter(v2)
        .find(|e| is_ipv4_mapped(&e.gid))
        .or_else(|| entries.iter().filter(v2).find(|e| !is_link_local(&e.gid)))
        .or_else(|| entries.iter().find(v2))
        .or_else(|| entries.iter().min_by_key(|e| e.index))
        .map(|e| e.index)
}

/// Populated entries of `device`'s `port` from sysfs (empty if unreadable).
pub fn read_sysfs(device: &str, port: u8, table_len: u32) -> Vec<GidEntry> {
    let base = Path::new("/sys/class/infiniband")
        .join(device)
        .join("ports")
        .join(port.to_string());
    let zero = "0000:0000:0000:0000:0000:0000:0000:0000";
    (0..table_len.min(4096))
        .filter_map(|i| {
            let gid = std::fs::read_to_string(base.join("gids").join(i.to_string())).ok()?;
            let gid = gid.trim().to_string();
            if gid == zero {
                return None;
            }
            let kind = std::fs::read_to_string(base.join("gid_attrs/types").join(i.to_string()))
                .map(|s| s.trim().to_string())
                .unwrap_or_default();
            Some(GidEntry {
                index: i,
                gid,
                kind,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(index: u32, gid: &str, kind: &str) -> GidEntry {
        GidEntry {
            index,
            gid: gid.into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn prefers_roce_v2_ipv4_mapped() {
        let t = [
            e(0, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "IB/RoCE v1"),
            e(1, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "RoCE v2"),
            e(2, "0000:0000:0000:0000:0000:ffff:0a00:020f", "IB/RoCE v1"),
            e(3, "0000:0000:0000:0000:0000:ffff:0a00:020f", "RoCE v2"),
        ];
        assert_eq!(choose(&t), Some(3));
        assert_eq!(choose(&t[..3]), Some(1));
        assert_eq!(choose(&t[..1]), Some(0));
        assert_eq!(choose(&[]), None);
    }

    #[test]
    fn global_v6_beats_link_local() {
        let t = [
            e(1, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "RoCE v2"),
            e(5, "fd00:0000:0000:0000:0000:0000:0000:0001", "RoCE v2"),
        ];
        assert_eq!(choose(&t), Some(5));
    }
}
