#!/bin/sh
# Seeds fuzz/corpus/<target>/ from the repository's own example files, the fenced TOML and JSON
# blocks of docs/, the raw-string configurations of the crates' unit tests, and a few notice
# query strings written here. Idempotent: seeds are named by content, and whatever the fuzzer
# already added to a corpus stays. Run from anywhere (it cds to its own directory).
set -eu
cd "$(dirname "$0")"
root=..
targets="notice_params exchange_config bidder_config campaigns_json campaigns_toml consent_gpp consent_tcf records_line"
for t in $targets; do mkdir -p "corpus/$t"; done

# put TARGET NAME: stdin to corpus/TARGET/seed-NAME-<hash>, skipped when empty.
put() {
    put_file=$(mktemp)
    cat > "$put_file"
    if [ -s "$put_file" ]; then
        mv "$put_file" "corpus/$1/seed-$2-$(cksum < "$put_file" | cut -d' ' -f1)"
    else
        rm -f "$put_file"
    fi
}

# blocks LANG FILE: prints the fenced ```LANG blocks of a markdown file, a NUL byte after each.
blocks() {
    awk -v lang="$1" '
        $0 == "```" lang { inside = 1; next }
        inside && /^```/ { inside = 0; printf "%c", 0; next }
        inside { print }
    ' "$2"
}

# raw_strings FILE: prints the r#"..."# literals of a Rust file, a NUL byte after each.
raw_strings() {
    awk '
        {
            line = $0
            for (;;) {
                if (!inside) {
                    i = index(line, "r#\"")
                    if (i == 0) break
                    line = substr(line, i + 3); inside = 1; text = ""
                }
                j = index(line, "\"#")
                if (j == 0) { text = text line "\n"; break }
                printf "%s%c", text substr(line, 1, j - 1), 0
                line = substr(line, j + 2); inside = 0
            }
        }
    ' "$1"
}

# each TARGET NAME: each NUL-terminated record of stdin becomes one seed.
each() {
    each_dir=$(mktemp -d)
    # A NUL-separated stream to one file per record, without relying on GNU-only options.
    tr '\0' '\036' | awk -v dir="$each_dir" 'BEGIN { RS = "\036"; n = 0 }
        { n++; f = dir "/" n; printf "%s", $0 > f; close(f) }'
    for f in "$each_dir"/*; do
        if [ -f "$f" ]; then put "$1" "$2" < "$f"; fi
    done
    rm -rf "$each_dir"
}

put exchange_config example < "$root/examples/exchange.toml"
put bidder_config example < "$root/examples/bidder.toml"
put campaigns_json example < "$root/examples/campaigns.json"

blocks toml "$root/docs/bidder.md" | each bidder_config docs
blocks json "$root/docs/campaigns.md" | each campaigns_json docs
blocks toml "$root/docs/campaigns.md" | each campaigns_toml docs

raw_strings "$root/crates/exchange/src/config.rs" | each exchange_config unit
raw_strings "$root/crates/bidder/src/config.rs" | each bidder_config unit
# The campaign unit tests hold both syntaxes: JSON opens with { or [{ or [], TOML with [[ or a key.
unit_dir=$(mktemp -d)
raw_strings "$root/crates/campaigns/src/tests/schema.rs" | tr '\0' '\036' |
    awk -v dir="$unit_dir" 'BEGIN { RS = "\036" }
        { n++; s = $0; sub(/^[ \t\n]+/, "", s)
          f = dir "/" ((s ~ /^(\{|\[[ \t\n]*[{\]])/) ? "json" : "toml") "-" n; printf "%s", $0 > f; close(f) }'
for f in "$unit_dir"/json-*; do if [ -f "$f" ]; then put campaigns_json unit < "$f"; fi; done
for f in "$unit_dir"/toml-*; do if [ -f "$f" ]; then put campaigns_toml unit < "$f"; fi; done
rm -rf "$unit_dir"

# Small hand-written configurations: every section present, and edge values.
printf 'node = "edge-1"\n[deadline]\ndefault_tmax_ms = 1\nmax_tmax_ms = 60000\nanswer_margin_ms = 0\n[auction]\nsecond_price_increment = 0.0\ndefault_currency = "EUR"\n[[bidders]]\nname = "a.b-c_d"\nendpoint = "http://[::1]:9/x?y=1"\nmax_connections = 65536\nenabled = false\n' |
    put exchange_config edges
printf 'campaigns = "c.toml"\nnode = "n_1"\npublic_url = "https://bid.example"\nseat = "s"\n[deadline]\ndefault_tmax_ms = 2\nmax_tmax_ms = 60000\nanswer_margin_ms = 1\n[http]\nmax_body_bytes = 1\nread_timeout_ms = 600000\n[ledger]\nbackend = "redis"\nredis_url = "redis://h:7000/2"\nredis_prefix = ""\nredis_mode = "per-bid"\nredis_timeout_ms = 10000\nlease_chunk = 0.000000001\nlease_report_ms = 60000\nlease_ttl_ms = 240000\nreservation_ttl_ms = 1000\ncharge_on = "bill"\n[pacing]\ncontrol_interval_ms = 10\nseed = 9223372036854775807\n' |
    put bidder_config edges
printf '{"campaign": [{"id": "v", "budget": {"total": 0.000000001}, "bid": {"cpm": 0.000001}, "creatives": [{"id": "v1", "video": {"mimes": ["Video/MP4"], "duration": 3600, "protocols": [7, 3, 3]}, "adm": "<VAST/>"}], "targeting": {"hours": [0, 23], "sizes": ["1x1", "16384X16384"], "deals": ["d"]}}]}' |
    put campaigns_json edges
printf '[[campaign]]\nid = "t"\nbudget = { total = 1e9 }\nbid = { cpm = 1e9, shading = 1 }\nflight = { start = 1970-01-01T00:00:00Z, end = "9999-12-31T23:59:59Z" }\n[[campaign.creatives]]\nid = "x"\nw = 1\nh = 1\nadm = "x"\n' |
    put campaigns_toml edges

# Notice query strings: what the bidder's own URLs look like once the exchange has replaced
# the macros, and the ways they go wrong.
for q in \
    'r=n1-2a&c=summer%20sale%2F1&price=1.234567' \
    'r=n1-2a&c=c&price=${AUCTION_PRICE}' \
    'r=b&c=c&loss=102' \
    'r=a&price=0.0000005' \
    'r=a&price=1e-6' \
    'r=a&price=2.5E1' \
    'r=a&price=1000000000' \
    'r=a&price=-1' \
    'r=a&price=.25&r=b&price=3' \
    'c=only&price=1' \
    'r=a+b&price=1' \
    'r=%61&c=%zz%&price=%31' \
    '&&=&r=&c=&price=' ; do
    printf '%s' "$q" | put notice_params hand
done

# GPP strings: those IAB's encoder wrote for the consent crate's tests (one per line of the
# fixture's "string" fields), and a few written here.
sed -n 's/^ *"string": "\(.*\)",$/\1/p' "$root/crates/consent/fixtures/gpp/gpp_cases.json" |
    while IFS= read -r s; do printf '%s' "$s" | put consent_gpp fixture; done
for s in 'DBAA' 'DBABTA~1YNN' 'DBABTA~1yn-' 'DBABMA~' 'DBABrw~CAA.QA~BAAAAABA.YA' '1NYY'; do
    printf '%s' "$s" | put consent_gpp hand
done
# TC strings written by IAB's encoder (one case a line in the fixture file), and the
# hand-made vendor list.
sed -n 's/.*"string":"\([^"]*\)".*/\1/p' "$root/crates/consent/fixtures/tcf/tcf_cases.json" |
    while read -r tc; do printf '%s' "$tc" | put consent_tcf iab; done
put consent_tcf gvl < "$root/crates/consent/fixtures/gvl/small.json"

for t in $targets; do
    echo "$t: $(ls "corpus/$t" | wc -l) inputs"
done

# Record lines: one of each kind, as the exchange and the bidder write them.
printf '%s' '{"kind":"auction","v":1,"id":"x-1","request_id":"r","at_ms":1764000000000,"seller":"pub","outcome":"bid","currency":"USD","floor_permille":1000,"imps":[{"id":"1","media":"banner","floor_micros":500000,"deals":[{"id":"d","floor_micros":900000,"at":3,"wseat":["s"]}]}],"calls":[{"bidder":"a","outcome":"bid","took_us":1250,"privacy":["ids_removed"]},{"bidder":"b","outcome":"skipped","skip":"privacy","not_called":"no_consent"}],"bids":[{"bidder":"a","id":"b1","imp":"1","price_micros":2000000,"cur":"EUR","converted_micros":2160000,"adomain":["a.example"],"cat":["IAB1"],"status":"won"},{"bidder":"a","id":"b2","imp":"1","price_micros":1,"status":"no_markup","excluded":true}],"wins":[{"imp":"1","bidder":"a","bid":"b1","rule":"second_price","cleared_micros":510000,"charged_micros":472222,"cur":"EUR","billing_by":"exchange"}]}' | put records_line auction
printf '%s' '{"kind":"notice","v":1,"auction":"x-1","bidder":"a","notice":"billing","outcome":"sent","at_ms":1,"imp":"1","bid":"b1","price_micros":472222,"status":204,"attempts":1}' | put records_line notice
printf '%s' '{"kind":"ledger","v":1,"event":"commit","at_ms":2,"node":"n","reservation":"b1","auction":"x-1","imp":"1","campaign":"c","amount_nanos":472222,"notice":"billing","outcome":"charged"}' | put records_line ledger
