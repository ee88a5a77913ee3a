#!/bin/sh
# Seeds the fuzz corpora from the crate's JSON fixtures (bid requests and responses, native
# requests) and a few win-notice templates; `repair` gets the requests and the native requests.
# Run from crates/openrtb/fuzz (or anywhere: it cds to its own directory).
set -eu
cd "$(dirname "$0")"
fixtures=../tests/fixtures
mkdir -p corpus/request_decode corpus/response_decode corpus/decode_differential corpus/macro_substitute corpus/native_request corpus/convert corpus/repair
cp "$fixtures"/spec-2.6/request-*.json corpus/request_decode/
cp "$fixtures"/realistic-2.5k.json corpus/request_decode/
cp "$fixtures"/spec-2.6/response-*.json corpus/response_decode/
cp "$fixtures"/spec-2.6/*.json "$fixtures"/realistic-2.5k.json corpus/decode_differential/
cp "$fixtures"/native-1.2/*.json corpus/native_request/
cp "$fixtures"/spec-2.6/request-*.json "$fixtures"/realistic-2.5k.json "$fixtures"/convert/*.json corpus/convert/
printf '%s' 'https://dsp.example/win?id=${AUCTION_ID}&imp=${AUCTION_IMP_ID}&p=${AUCTION_PRICE}&c=${AUCTION_CURRENCY}' > corpus/macro_substitute/nurl
printf '%s' 'https://dsp.example/bill?p=${AUCTION_PRICE:B64}&m=${AUCTION_MIN_TO_WIN}&l=${AUCTION_LOSS}&t=${AUCTION_IMP_TS}&r=${AUCTION_MBR}' > corpus/macro_substitute/burl
printf '%s' '<img src="https://t.example/i?s=${AUCTION_SEAT_ID}&a=${AUCTION_AD_ID}&b=${AUCTION_BID_ID}&x=${UNKNOWN}&y=${AUCTION_PRICE:OXCRYPT}">' > corpus/macro_substitute/adm
cp "$fixtures"/spec-2.6/request-*.json "$fixtures"/realistic-2.5k.json "$fixtures"/native-1.2/*.json corpus/repair/
echo "seeded: $(ls corpus/request_decode | wc -l) requests, $(ls corpus/response_decode | wc -l) responses, $(ls corpus/macro_substitute | wc -l) templates, $(ls corpus/native_request | wc -l) native requests, $(ls corpus/convert | wc -l) conversion inputs, $(ls corpus/repair | wc -l) for repair"
