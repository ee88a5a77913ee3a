//! The CLI never misleads: a flag a command would ignore is refused by name, every command
//! shares one set of conventions (seed, ranges, table names, listen addresses), and
//! `gavel check-config` (or a server's `--check`) validates a configuration without starting
//! anything. Real processes; nothing here needs the network beyond loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Command;

use testkit::TempDir;

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gavel"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Fails unless `gavel ARGS` is refused with a message naming every one of `names`.
fn refused(args: &[&str], names: &[&str]) -> String {
    let (ok, _, stderr) = run(args);
    assert!(!ok, "{args:?} was accepted");
    for name in names {
        assert!(
            stderr.contains(name),
            "{args:?}: {name} not named in {stderr}"
        );
    }
    stderr
}

const URL: &str = "http://127.0.0.1:9/";

#[test]
fn a_flag_the_command_would_ignore_is_refused_by_name() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["load", "--url", URL, "--closed-loop", "--rate", "500"],
            &["--rate", "--closed-loop"],
        ),
        (
            &["load", "--url", URL, "--ramp", "100:200", "--rate", "500"],
            &["--rate", "--ramp"],
        ),
        (
            &["load", "--url", URL, "--slo-p99", "10ms"],
            &["--slo-p99", "--find-capacity"],
        ),
        (
            &["load", "--url", URL, "--min-success", "99"],
            &["--min-success", "--find-capacity"],
        ),
        (
            &["load", "--url", URL, "--max-rate", "5000"],
            &["--max-rate", "--find-capacity"],
        ),
        (
            &[
                "load",
                "--url",
                URL,
                "--find-capacity",
                "--slo-p99",
                "5ms",
                "--slo",
                "5ms",
            ],
            &["--slo", "--find-capacity"],
        ),
        (
            &["load", "--url", URL, "--requests", "r.json", "--seed", "3"],
            &["--seed", "--requests"],
        ),
        (
            &["load", "--url", URL, "--requests", "r.json", "--tmax", "50"],
            &["--tmax", "--requests"],
        ),
        (
            &[
                "load",
                "--url",
                URL,
                "--closed-loop",
                "--max-connections",
                "8",
            ],
            &["--max-connections", "--closed-loop"],
        ),
        (
            &["sim", "--bidders", "3", "--profiles", "p.toml"],
            &["--bidders", "--profiles"],
        ),
        (
            &["baseline", "--bidder-timeout", "50"],
            &["--bidder-timeout", "--bidders"],
        ),
        (&["--log", "loud", "demo"], &["--log", "loud"]),
        // Values that would be silently overridden by another flag.
        (
            &["load", "--url", URL, "--tmax", "5000"],
            &["--tmax", "--timeout"],
        ),
        (
            &[
                "load",
                "--url",
                URL,
                "--find-capacity",
                "--slo-p99",
                "5ms",
                "--rate",
                "500",
                "--max-rate",
                "100",
            ],
            &["--rate", "--max-rate"],
        ),
    ];
    for (args, names) in cases {
        refused(args, names);
    }
}

#[test]
fn commands_share_one_seed_and_one_range_for_bidders_and_tmax() {
    for command in ["demo", "sim", "load"] {
        let (ok, help, _) = run(&[command, "--help"]);
        assert!(ok);
        let seed = help
            .split("--seed")
            .nth(1)
            .unwrap_or_else(|| panic!("{command} has no --seed"));
        let seed = &seed[..seed.find("\n  -").unwrap_or(seed.len())];
        assert!(seed.contains("[default: 7]"), "{command}: {seed}");
    }
    for command in ["demo", "sim"] {
        refused(&[command, "--bidders", "101"], &["--bidders", "101"]);
        refused(&[command, "--bidders", "0"], &["--bidders"]);
    }
    for command in ["demo", "load"] {
        let mut args = vec![command, "--tmax", "19"];
        if command == "load" {
            args.extend(["--url", URL]);
        }
        refused(&args, &["--tmax", "20..=10000"]);
    }
}

#[test]
fn help_lists_every_command_on_one_line() {
    let (ok, help, _) = run(&["--help"]);
    assert!(ok);
    for command in [
        "exchange",
        "bidder",
        "sim",
        "edge",
        "load",
        "demo",
        "check-config",
        "ledger",
        "baseline",
    ] {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{command} ")))
            .unwrap_or_else(|| panic!("{command} missing from\n{help}"));
        let words = line.trim_start()[command.len()..].trim();
        assert!(words.len() > 10, "{command} has no description: {line:?}");
    }
}

#[test]
fn listen_takes_a_host_name() {
    let dir = TempDir::new("listen");
    let config = dir.file("exchange.toml", "open_to_all_sellers = true\n");
    let (mut child, line, _) = common::spawn_listening_with(
        "exchange",
        &config,
        &["--listen", "localhost:0", "--admin-listen", "localhost:0"],
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("listening on http://127.0.0.1:"), "{line:?}");
    refused(
        &[
            "exchange",
            "--config",
            "x.toml",
            "--listen",
            "no-such-host.invalid:80",
        ],
        &["--listen", "no-such-host.invalid"],
    );
    refused(
        &["exchange", "--config", "x.toml", "--listen", "localhost"],
        &["--listen", "port"],
    );
}

#[test]
fn check_config_validates_an_exchange_file_and_prints_what_is_in_effect() {
    let dir = TempDir::new("check-exchange");
    let good = dir.file(
        "exchange.toml",
        "open_to_all_sellers = true\n[[bidders]]\nname = \"a\"\nendpoint = \"http://127.0.0.1:9/bid\"\n",
    );
    for args in [
        vec!["check-config", good.to_str().unwrap()],
        vec!["exchange", "--config", good.to_str().unwrap(), "--check"],
    ] {
        let (ok, stdout, stderr) = run(&args);
        assert!(ok, "{args:?}: {stderr}");
        assert!(
            stdout.contains("a valid exchange configuration: bidders 1"),
            "{stdout}"
        );
        // Defaults filled in: keys the file never wrote.
        for key in [
            "listen = \"127.0.0.1:8080\"",
            "[deadline]",
            "answer_margin_ms = 10",
            "max_connections = 64",
        ] {
            assert!(stdout.contains(key), "{key} missing from\n{stdout}");
        }
    }
    let bad = dir.file(
        "bad.toml",
        "open_to_all_sellers = true\n[[bidders]]\nname = \"a\"\nendpoint = \"ftp://x/\"\n",
    );
    let stderr = refused(
        &["check-config", bad.to_str().unwrap()],
        &["bidders[0].endpoint"],
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    refused(
        &["exchange", "--config", bad.to_str().unwrap(), "--check"],
        &["bidders[0].endpoint"],
    );
}

#[test]
fn check_config_warns_about_what_would_silently_stop_billing() {
    let dir = TempDir::new("check-warnings");
    // World-readable, as a key copied with default permissions is.
    let key = dir.file("pub-a.key", "example-only-pub-a-0123456789abcdef\n");
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let config = dir.file(
        "exchange.toml",
        "[[sellers]]\nname = \"pub-a\"\nkey_file = \"pub-a.key\"\n\
         [[bidders]]\nname = \"local\"\nendpoint = \"http://127.0.0.1:9/bid\"\n\
         [[bidders]]\nname = \"gone\"\nendpoint = \"http://no-such-host.invalid/bid\"\n",
    );
    let (ok, stdout, stderr) = run(&["check-config", config.to_str().unwrap()]);
    assert!(
        ok,
        "an unresolvable bidder does not refuse the file: {stderr}"
    );
    assert!(
        stdout.contains("bidder hosts resolved now: local 127.0.0.1 -> 127.0.0.1; gone no-such-host.invalid -> UNRESOLVED"),
        "{stdout}"
    );
    // A limit the file leaves unset is printed as the one in effect.
    assert!(
        stdout.contains("[http]\nmax_body_bytes = 262144\n"),
        "{stdout}"
    );
    for warning in [
        "warning: bidders[0] (\"local\"): endpoint 127.0.0.1 resolves to 127.0.0.1",
        "set notices.allow_private_addresses = true",
        "warning: bidders[1] (\"gone\"): endpoint no-such-host.invalid does not resolve",
        "warning: sellers[0] (\"pub-a\"): uses an example key",
    ] {
        assert!(stdout.contains(warning), "{warning} missing from\n{stdout}");
    }
    assert!(
        stderr.contains("seller \"pub-a\"") && stderr.contains("readable by every user"),
        "{stderr}"
    );
    // On a listener others can reach, the example key is refused outright.
    let stderr = refused(
        &[
            "exchange",
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "0.0.0.0:0",
        ],
        &["pub-a", "example keys", "openssl rand"],
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    drop(key);
}

#[test]
fn check_config_validates_a_bidder_file_with_its_campaigns() {
    let dir = TempDir::new("check-bidder");
    let security = testkit::secrets::security_toml(dir.path());
    let config = dir.file(
        "bidder.toml",
        &format!(
            "campaigns = \"campaigns.json\"\n{security}[ledger]\nbackend = \"redis\"\n\
             redis_url = \"redis://user:s3cret@127.0.0.1:9/0\"\n"
        ),
    );
    dir.file(
        "campaigns.json",
        r#"[{"id": "shoes", "budget": {"total": 10}, "bid": {"cpm": 2},
            "creatives": [{"id": "c", "w": 300, "h": 250, "adm": "<div/>"}]}]"#,
    );
    let (ok, stdout, stderr) = run(&["check-config", config.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("campaigns 1"), "{stdout}");
    assert!(stdout.contains("(shoes)"), "{stdout}");
    assert!(stdout.contains("\nmax_body_bytes = 262144\n"), "{stdout}");
    assert!(stdout.contains("notices signed"), "{stdout}");
    // Redis is named, not called; its password is never printed.
    assert!(stdout.contains("127.0.0.1:9"), "{stdout}");
    assert!(!stdout.contains("s3cret"), "{stdout}");
    let (ok, stdout, _) = run(&["bidder", "--config", config.to_str().unwrap(), "--check"]);
    assert!(ok);
    assert!(stdout.contains("campaigns 1"), "{stdout}");

    // A bad campaign file fails the check, naming the campaign's problem.
    dir.file(
        "campaigns.json",
        r#"[{"id": "shoes", "budget": {"total": -10}, "bid": {"cpm": 2},
            "creatives": [{"id": "c", "w": 300, "h": 250, "adm": "<div/>"}]}]"#,
    );
    refused(&["check-config", config.to_str().unwrap()], &["budget"]);
}

#[test]
fn check_config_tells_the_kind_from_the_keys_or_asks_for_it() {
    let dir = TempDir::new("check-kinds");
    let sim = dir.file(
        "fleet.toml",
        "[[bidders]]\nname = \"s\"\nprice = { kind = \"fixed\", cpm = 1 }\n",
    );
    let (ok, stdout, stderr) = run(&["check-config", sim.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("simulated bidders 1"), "{stdout}");
    let old = dir.file(
        "old.toml",
        "[[bidder]]\nname = \"s\"\nprice = { kind = \"fixed\", cpm = 1 }\n",
    );
    refused(&["check-config", old.to_str().unwrap()], &["[[bidders]]"]);
    refused(
        &["sim", "--profiles", old.to_str().unwrap()],
        &["[[bidders]]"],
    );

    let edge = dir.file(
        "edge.toml",
        "[[origins]]\nname = \"o\"\nurl = \"http://127.0.0.1:9/\"\n",
    );
    let (ok, stdout, stderr) = run(&["check-config", edge.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("a valid edge configuration: origins 1"),
        "{stdout}"
    );
    // Unset, the edge's body limit is what its store's limits make a put.
    assert!(stdout.contains("\nmax_body_bytes = "), "{stdout}");

    // What the edge reads at start is checked too: its certificate directory.
    let no_certs = dir.file(
        "edge-tls.toml",
        "[[origins]]\nname = \"o\"\nurl = \"http://127.0.0.1:9/\"\n[tls]\ncert_dir = \"no-such-dir\"\n",
    );
    refused(
        &["check-config", no_certs.to_str().unwrap()],
        &["tls.cert_dir"],
    );

    let unclear = dir.file("unclear.toml", "listen = \"127.0.0.1:1\"\n");
    refused(&["check-config", unclear.to_str().unwrap()], &["--kind"]);
    let (ok, stdout, _) = run(&[
        "check-config",
        "--kind",
        "exchange",
        unclear.to_str().unwrap(),
    ]);
    // An exchange needs sellers or open_to_all_sellers: the check says so, by key.
    assert!(!ok, "{stdout}");
    refused(
        &[
            "check-config",
            "--kind",
            "exchange",
            unclear.to_str().unwrap(),
        ],
        &["open_to_all_sellers"],
    );
    refused(
        &["check-config", dir.join("missing.toml").to_str().unwrap()],
        &["missing.toml"],
    );
}
