//! The README quickstart, run exactly as written with the real `scion` and `sqlite3`.

mod common;

use std::process::Command;

#[test]
fn readme_quickstart_runs_as_written() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let start = readme
        .find("<!-- quickstart:start -->")
        .expect("quickstart start marker");
    let end = readme
        .find("<!-- quickstart:end -->")
        .expect("quickstart end marker");
    let block = &readme[start..end];
    let code = block
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh code block between the markers");
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = common::bin().parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", code])
        .current_dir(dir.path())
        .env("PATH", path)
        .env_remove("SCION_STORE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "quickstart failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("apple|2.0\npear|5.0\n"),
        "the fork doubled prices:\n{stdout}"
    );
    assert!(
        stdout.contains("apple|1.0\npear|2.5\n"),
        "main is untouched:\n{stdout}"
    );
    assert!(
        stdout.contains("checkpoint shop@try-1@doubled at version 2"),
        "{stdout}"
    );
    assert!(
        stdout.contains("try-1 "),
        "status lists the fork:\n{stdout}"
    );
}
