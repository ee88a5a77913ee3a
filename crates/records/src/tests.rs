use super::*;

fn auction() -> AuctionRecord {
    AuctionRecord {
        v: VERSION,
        id: "x1-2a".to_owned(),
        request_id: "r".to_owned(),
        at_ms: 1_764_000_000_000,
        seller: "pub".to_owned(),
        outcome: Cow::Borrowed("bid"),
        currency: "USD".to_owned(),
        floor_permille: 1000,
        imps: vec![ImpSummary {
            id: "1".to_owned(),
            media: Some(Cow::Borrowed("banner")),
            floor_micros: 500_000,
            ..ImpSummary::default()
        }],
        calls: vec![Call {
            bidder: "dsp".to_owned(),
            outcome: Cow::Borrowed("bid"),
            took_us: Some(1_250),
            ..Call::default()
        }],
        bids: vec![BidLine {
            bidder: "dsp".to_owned(),
            id: "b".to_owned(),
            imp: "1".to_owned(),
            price_micros: 2_000_000,
            status: Cow::Borrowed("won"),
            ..BidLine::default()
        }],
        wins: vec![Win {
            imp: "1".to_owned(),
            bidder: "dsp".to_owned(),
            bid: "b".to_owned(),
            rule: Cow::Borrowed("second_price"),
            cleared_micros: 510_000,
            charged_micros: 510_000,
            ..Win::default()
        }],
        ..AuctionRecord::default()
    }
}

#[test]
fn a_record_reads_back_as_written() {
    let records = [
        Record::Auction(Box::new(auction())),
        Record::Notice(NoticeRecord {
            v: VERSION,
            auction: "x1-2a".to_owned(),
            bidder: "dsp".to_owned(),
            notice: Cow::Borrowed("billing"),
            outcome: Cow::Borrowed("sent"),
            at_ms: 1,
            price_micros: Some(510_000),
            status: Some(204),
            attempts: 1,
            ..NoticeRecord::default()
        }),
        Record::Ledger(LedgerRecord {
            v: VERSION,
            event: LedgerEvent::Commit,
            at_ms: 2,
            node: "b1".to_owned(),
            reservation: Some("b".to_owned()),
            auction: Some("x1-2a".to_owned()),
            imp: Some("1".to_owned()),
            campaign: Some("c".to_owned()),
            amount_nanos: 510_000,
            notice: Some(Cow::Borrowed("billing")),
            outcome: Some(Cow::Borrowed("charged")),
            reason: None,
            suppressed: 0,
        }),
    ];
    for record in records {
        let mut line = Vec::new();
        to_line(&record, &mut line).unwrap();
        assert_eq!(from_line(&line).unwrap(), record);
    }
}

#[test]
fn empty_values_are_left_out_and_the_kind_comes_first() {
    let mut line = Vec::new();
    to_line(&Record::Auction(Box::new(auction())), &mut line).unwrap();
    let text = String::from_utf8(line).unwrap();
    assert!(
        text.starts_with(r#"{"kind":"auction","v":1,"id":"x1-2a""#),
        "{text}"
    );
    for absent in [
        "test",
        "blocks",
        "inventory",
        "deals",
        "skip",
        "cur",
        "dropped",
    ] {
        assert!(
            !text.contains(&format!("\"{absent}\"")),
            "{absent} in {text}"
        );
    }
}

#[test]
fn a_newer_version_is_refused_by_name() {
    let line = br#"{"kind":"notice","v":9,"auction":"a","bidder":"b","notice":"win","outcome":"sent","at_ms":1}"#;
    let err = from_line(line).unwrap_err();
    assert!(matches!(err, RecordError::NewerVersion(9)), "{err}");
    assert!(err.to_string().contains("upgrade"), "{err}");
}

#[test]
fn version_zero_and_negative_money_are_refused_by_name() {
    let notice = |v: i64, price: i64| {
        format!(
            r#"{{"kind":"notice","v":{v},"auction":"a","bidder":"b","notice":"win","outcome":"sent","at_ms":1,"price_micros":{price}}}"#
        )
    };
    let err = from_line(notice(0, 1).as_bytes()).unwrap_err();
    assert!(matches!(err, RecordError::UnknownVersion(0)), "{err}");
    assert!(err.to_string().contains("version 0"), "{err}");
    let err = from_line(notice(1, -5).as_bytes()).unwrap_err().to_string();
    assert!(err.contains("price_micros is negative (-5)"), "{err}");
    let ledger =
        br#"{"kind":"ledger","v":1,"event":"commit","at_ms":1,"node":"n","amount_nanos":-1}"#;
    let err = from_line(ledger).unwrap_err().to_string();
    assert!(err.contains("amount_nanos is negative"), "{err}");
    let mut a = auction();
    a.wins[0].charged_micros = -510_000;
    let mut line = Vec::new();
    to_line(&Record::Auction(Box::new(a)), &mut line).unwrap();
    let err = from_line(&line).unwrap_err().to_string();
    assert!(
        err.contains("wins[0].charged_micros is negative (-510000)"),
        "{err}"
    );
    let mut a = auction();
    a.imps[0].floor_micros = -1;
    let mut line = Vec::new();
    to_line(&Record::Auction(Box::new(a)), &mut line).unwrap();
    let err = from_line(&line).unwrap_err().to_string();
    assert!(err.contains("imps[0].floor_micros"), "{err}");
    // A bid's own price may be anything a bidder sent: it is what was refused, not money.
    let mut a = auction();
    if let Some(bid) = a.bids.first_mut() {
        bid.price_micros = -1;
    }
    let mut line = Vec::new();
    to_line(&Record::Auction(Box::new(a)), &mut line).unwrap();
    assert!(from_line(&line).is_ok());
}

#[test]
fn a_line_too_long_or_not_a_record_is_refused() {
    let long = vec![b' '; MAX_LINE_BYTES + 1];
    assert!(matches!(from_line(&long), Err(RecordError::TooLong(_))));
    for bad in [&b"{}"[..], b"[1]", b"{\"kind\":\"auction\"}", b"\xff"] {
        assert!(
            matches!(from_line(bad), Err(RecordError::Invalid(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn a_bid_in_another_currency_competes_at_its_converted_price() {
    let mut bid = BidLine {
        price_micros: 1_000_000,
        ..BidLine::default()
    };
    assert_eq!(bid.auction_price_micros(), Some(1_000_000));
    bid.cur = Some("EUR".to_owned());
    assert_eq!(bid.auction_price_micros(), None, "no rate: never compared");
    bid.converted_micros = Some(1_080_000);
    assert_eq!(bid.auction_price_micros(), Some(1_080_000));
}
