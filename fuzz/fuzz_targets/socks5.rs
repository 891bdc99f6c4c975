//! Any bytes as a SOCKS5 client's handshake, with and without passwords: the
//! server side ends (a destination or an error) once the client is done, and
//! never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::socks5::wire::handshake;
use tokio::io::AsyncWriteExt;

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
}

fuzz_target!(|data: &[u8]| {
    let (with_users, bytes) = match data.split_first() {
        Some((&flag, rest)) => (flag & 1 == 1, rest),
        None => (false, data),
    };
    let users = if with_users {
        vec![("u".to_string(), "p".to_string())]
    } else {
        vec![]
    };
    RUNTIME.with(|rt| {
        rt.block_on(async {
            let (mut client, mut server) = tokio::io::duplex(64 * 1024);
            client.write_all(bytes).await.unwrap();
            client.shutdown().await.unwrap();
            let ended = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                handshake(&mut server, &users, || true),
            )
            .await;
            assert!(ended.is_ok(), "the handshake ends once the client is done");
            if let Ok(Ok(connect)) = ended {
                assert!(connect.dest.host.len() <= 255 + 2);
                assert_eq!(connect.user.is_some(), with_users);
            }
        })
    });
});
