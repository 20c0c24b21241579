//! `scion ui`: the branch explorer in a browser. It runs the daemon with a listener on the
//! loopback interface and a token made for this run, prints the one URL that carries the
//! token (as Jupyter does), and opens it.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;

use anyhow::{Context, Result};
use scion_daemon::{Config, Daemon, Listen, Metrics};

use crate::cli::Cli;
use crate::cli_ui::UiArgs;

pub fn ui(cli: &Cli, args: &UiArgs) -> Result<()> {
    let metrics = Arc::new(Metrics::default());
    let observer = Arc::new(scion_daemon::StoreObserver(metrics.clone()));
    let scion = Arc::new(crate::store::open_store_observed(cli, observer)?.scion);
    if let Some(db) = &args.db {
        scion.engine().read_ref(&db.parse()?)?;
    }
    let socket = scion_daemon::transport::default_socket(scion.engine().location());
    let running = scion_daemon::client::DaemonClient::new(&socket)
        .raw("GET", "/healthz", None, &[])
        .is_ok();
    // A port the kernel says is free now; the daemon binds it a moment later.
    // `--port 0` asks for any free one, as no flag does.
    let port = match args.port.filter(|p| *p != 0) {
        Some(p) => p,
        None => TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .context("finding a free loopback port")?
            .port(),
    };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let token = random_token();
    let mut url = format!("http://{addr}/ui?token={token}");
    if let Some(db) = &args.db {
        url += &format!("&db={db}");
    }
    let browser = std::env::var("BROWSER").unwrap_or_default();
    if running {
        // The daemon already serving the store is reused: the explorer's listener forwards
        // to its socket.
        // No address without its token here: a link that answers 401 is no link.
        eprintln!(
            "scion ui: reusing the daemon on {}; the explorer listens on {addr}, at the URL printed below (Ctrl-C stops the explorer, not the daemon)",
            socket.display()
        );
        outln!("{url}");
        if !args.no_browser && browser != "true" {
            std::thread::spawn(move || open_when_up(addr, &url, &browser));
        }
        scion_daemon::proxy::serve(socket, addr, token, args.writable)?;
        return Ok(());
    }
    let listen = Listen {
        socket: socket.clone(),
        tcp: Some(addr),
        token: Some(token),
        allow_remote: false,
        tokens: None,
        socket_tokens: false,
    };
    let config = Config {
        tcp_read_only: !args.writable,
        ..Config::default()
    };
    let daemon = Daemon::new(scion.clone(), config, metrics, listen)?;
    eprintln!(
        "scion ui: store {}; the explorer listens on {addr}, at the URL printed below (Ctrl-C stops it)",
        scion.engine().location()
    );
    outln!("{url}");
    if !args.no_browser && browser != "true" {
        std::thread::spawn(move || open_when_up(addr, &url, &browser));
    }
    daemon.serve()?;
    eprintln!("scion ui: stopped");
    Ok(())
}

/// 32 random bytes, hex: the token of this run.
fn random_token() -> String {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).expect("the OS random source is available");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Open `url` in `browser` (or the desktop's default) once the listener answers; a
/// machine without a browser keeps the printed URL.
fn open_when_up(addr: SocketAddr, url: &str, browser: &str) {
    for _ in 0..100 {
        if std::net::TcpStream::connect(addr).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let program = if browser.is_empty() {
        "xdg-open"
    } else {
        browser
    };
    let _ = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}
