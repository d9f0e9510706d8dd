//! What crosses the wire: the bootstrap address and the 4-byte header in
//! front of every two-sided message. Everything decoded is checked.

/// The transport header in front of every two-sided message.
pub const MSG_HDR: usize = 4;
const MSG_MAGIC: u8 = 0xB7;
const ADDR_MAGIC: &[u8; 4] = b"OVBV";
const ADDR_VERSION: u8 = 1;

/// The kind of a two-sided message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgKind {
    /// A caller's message; consumes a credit.
    Data,
    /// Only returns credits.
    Credit,
}

/// Encode the header: magic, kind, returned credits.
pub fn encode_hdr(kind: MsgKind, credits: u16) -> [u8; MSG_HDR] {
    let c = credits.to_le_bytes();
    let k = match kind {
        MsgKind::Data => 0,
        MsgKind::Credit => 1,
    };
    [MSG_MAGIC, k, c[0], c[1]]
}

/// Decode and check a received header.
pub fn decode_hdr(b: &[u8]) -> Result<(MsgKind, u16), String> {
    if b.len() < MSG_HDR {
        return Err(format!(
            "message of {} bytes is shorter than the {MSG_HDR}-byte transport header",
            b.len()
        ));
    }
    if b[0] != MSG_MAGIC {
        return Err(format!(
            "bad transport header magic {:#04x} (expected {MSG_MAGIC:#04x})",
            b[0]
        ));
    }
    let kind = match b[1] {
        0 => MsgKind::Data,
        1 => MsgKind::Credit,
        k => return Err(format!("unknown transport message kind {k}")),
    };
    if kind == MsgKind::Credit && b.len() != MSG_HDR {
        return Err(format!(
            "credit message of {} bytes carries a payload",
            b.len()
        ));
    }
    Ok((kind, u16::from_le_bytes([b[2], b[3]])))
}

/// One rank's connection data for every peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    pub lid: u16,
    pub gid: [u8; 16],
    /// `ibv_mtu` enum value the rank wants (the pair uses the smaller).
    pub mtu: u8,
    /// Data receive buffers posted per peer (the credit window).
    pub rx_window: u32,
    /// Size of one receive buffer, transport header included.
    pub buf_size: u32,
    /// `(qpn, psn)` of the QP this rank created for each rank (self: 0, 0).
    pub qps: Vec<(u32, u32)>,
    /// With `--cm`: the IPv4 address and port this rank's rdma_cm listens on.
    pub cm: Option<([u8; 4], u16)>,
}

const FIXED: usize = 4 + 1 + 2 + 16 + 1 + 4 + 4 + 4;
const CM_TRAILER: usize = 7;

impl Address {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(FIXED + 8 * self.qps.len());
        v.extend_from_slice(ADDR_MAGIC);
        v.push(ADDR_VERSION);
        v.extend_from_slice(&self.lid.to_le_bytes());
        v.extend_from_slice(&self.gid);
        v.push(self.mtu);
        v.extend_from_slice(&self.rx_window.to_le_bytes());
        v.extend_from_slice(&self.buf_size.to_le_bytes());
        v.extend_from_slice(&(self.qps.len() as u32).to_le_bytes());
        for (qpn, psn) in &self.qps {
            v.extend_from_slice(&qpn.to_le_bytes());
            v.extend_from_slice(&psn.to_le_bytes());
        }
        if let Some((ip, port)) = self.cm {
            v.push(1);
            v.extend_from_slice(&ip);
            v.extend_from_slice(&port.to_le_bytes());
        }
        v
    }

    /// Decode `b`, expecting entries for `size` ranks.
    pub fn decode(b: &[u8], size: u32) -> Result<Address, String> {
        if b.len() < FIXED {
            return Err(format!(
                "address of {} bytes is shorter than {FIXED}",
                b.len()
            ));
        }
        if &b[0..4] != ADDR_MAGIC {
            return Err(
                "not a verbs address (bad magic): are all ranks using --transport verbs?".into(),
            );
        }
        if b[4] != ADDR_VERSION {
            return Err(format!(
                "verbs address version {} (this ovbench speaks {ADDR_VERSION}): run the same ovbench on every rank",
                b[4]
            ));
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let lid = u16::from_le_bytes([b[5], b[6]]);
        let gid: [u8; 16] = b[7..23].try_into().expect("16 bytes");
        let mtu = b[23];
        let rx_window = u32_at(24);
        let buf_size = u32_at(28);
        let n = u32_at(32);
        if n != size {
            return Err(format!("address lists {n} ranks, the job has {size}"));
        }
        let base = FIXED + 8 * n as usize;
        let cm = match b.len().checked_sub(base) {
            Some(0) => None,
            Some(CM_TRAILER) if b[base] == 1 => {
                let ip: [u8; 4] = b[base + 1..base + 5].try_into().expect("4 bytes");
                let port = u16::from_le_bytes([b[base + 5], b[base + 6]]);
                if port == 0 {
                    return Err("rdma_cm port 0 announced".into());
                }
                Some((ip, port))
            }
            _ => {
                return Err(format!(
                    "address of {} bytes, expected {base} (or {} with --cm) for {n} ranks",
                    b.len(),
                    base + CM_TRAILER
                ))
            }
        };
        if !(1..=5).contains(&mtu) {
            return Err(format!("invalid MTU code {mtu}"));
        }
        if !(1..=crate::credits::MAX_WINDOW).contains(&rx_window) {
            return Err(format!("invalid receive window {rx_window}"));
        }
        let qps = (0..n as usize)
            .map(|i| {
                let (qpn, psn) = (u32_at(FIXED + 8 * i), u32_at(FIXED + 8 * i + 4));
                if qpn > 0xFF_FFFF || psn > 0xFF_FFFF {
                    Err(format!(
                        "QP number {qpn:#x} or PSN {psn:#x} exceeds 24 bits"
                    ))
                } else {
                    Ok((qpn, psn))
                }
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Address {
            lid,
            gid,
            mtu,
            rx_window,
            buf_size,
            qps,
            cm,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> Address {
        Address {
            lid: 7,
            gid: [0xfe; 16],
            mtu: 3,
            rx_window: 4,
            buf_size: 16448,
            qps: vec![(0, 0), (0x11, 0x22_3344)],
            cm: None,
        }
    }

    #[test]
    fn address_roundtrip_and_checks() {
        let a = addr();
        let b = a.encode();
        assert_eq!(Address::decode(&b, 2).unwrap(), a);
        assert!(Address::decode(&b, 3).unwrap_err().contains("job has 3"));
        assert!(Address::decode(&b[..b.len() - 1], 2).is_err());
        let mut bad = b.clone();
        bad[0] = b'X';
        assert!(Address::decode(&bad, 2).unwrap_err().contains("magic"));
        let mut bad = b.clone();
        bad[23] = 9;
        assert!(Address::decode(&bad, 2).unwrap_err().contains("MTU"));
        let mut a2 = a.clone();
        a2.qps[1].0 = 0x100_0000;
        assert!(Address::decode(&a2.encode(), 2)
            .unwrap_err()
            .contains("24 bits"));
        let mut a3 = a.clone();
        a3.rx_window = 0;
        assert!(Address::decode(&a3.encode(), 2).is_err());
        let mut a4 = a;
        a4.cm = Some(([10, 0, 2, 15], 4791));
        let b4 = a4.encode();
        assert_eq!(Address::decode(&b4, 2).unwrap(), a4);
        assert!(Address::decode(&b4[..b4.len() - 2], 2).is_err());
        let mut bad = b4.clone();
        let at = bad.len() - 7;
        bad[at] = 2;
        assert!(Address::decode(&bad, 2).is_err());
    }

    #[test]
    fn header_roundtrip_and_checks() {
        let h = encode_hdr(MsgKind::Data, 513);
        assert_eq!(decode_hdr(&h).unwrap(), (MsgKind::Data, 513));
        let c = encode_hdr(MsgKind::Credit, 2);
        assert_eq!(decode_hdr(&c).unwrap(), (MsgKind::Credit, 2));
        let mut long = c.to_vec();
        long.push(0);
        assert!(decode_hdr(&long).unwrap_err().contains("payload"));
        assert!(decode_hdr(&h[..3]).is_err());
        assert!(decode_hdr(&[0, 0, 0, 0]).unwrap_err().contains("magic"));
        assert!(decode_hdr(&[MSG_MAGIC, 9, 0, 0])
            .unwrap_err()
            .contains("kind"));
    }
}
