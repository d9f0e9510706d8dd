//! Options that cannot work are refused at construction, saying why.

use ovbench_tcp::{TcpOptions, TcpTransport};

#[test]
fn an_unspecified_bind_address_is_refused() {
    let opts = TcpOptions {
        bind: "0.0.0.0".parse().unwrap(),
        ..TcpOptions::default()
    };
    let e = TcpTransport::new(0, 2, opts).unwrap_err().to_string();
    assert!(e.contains("0.0.0.0") && e.contains("bind"), "{e}");
    assert!(TcpTransport::new(2, 2, TcpOptions::default()).is_err());
    let tiny = TcpOptions {
        eager_buf_size: 100,
        ..TcpOptions::default()
    };
    assert!(TcpTransport::new(0, 2, tiny).is_err());
}
