//! The README quickstart, run exactly as written with the real `scion` and `sqlite3`.

mod common;

#[test]
fn readme_quickstart_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = common::run_readme_quickstart(dir.path(), &[]);
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
