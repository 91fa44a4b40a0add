//! Property tests of the NBD parsers (`storqos_gateway::protocol`): whatever bytes a
//! client sends, a decoder returns a value or an error and never panics; what decodes
//! encodes back to the same bytes; what a well-behaved client encodes decodes to what it
//! meant. The coverage-guided fuzzers over the same parsers (and the live server) are in
//! `crates/storqos-gateway/fuzz` (docs/fuzzing.md).

use proptest::prelude::*;
use storqos_gateway::protocol::*;

/// Request magic and the NBD limits, from the spec (not from the code under test).
const SPEC_REQUEST_MAGIC: u32 = 0x2560_9513;
const SPEC_MAX_IO: u32 = 32 << 20;

proptest! {
    #[test]
    fn request_headers_never_panic_and_round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        match RequestHeader::decode(&bytes) {
            Ok(h) => {
                prop_assert!(bytes.len() >= 28);
                prop_assert_eq!(&h.encode()[..], &bytes[..28]);
                prop_assert!(!matches!(h.command, Command::Read | Command::Write) || h.length <= SPEC_MAX_IO);
            }
            Err(e) => prop_assert!(!e.to_string().contains('\n')),
        }
    }

    #[test]
    fn a_client_request_decodes_to_what_it_meant(
        flags in any::<u16>(), kind in any::<u16>(), cookie in any::<u64>(), offset in any::<u64>(),
        length in 0u32..=SPEC_MAX_IO,
    ) {
        let mut b = SPEC_REQUEST_MAGIC.to_be_bytes().to_vec();
        b.extend(flags.to_be_bytes());
        b.extend(kind.to_be_bytes());
        b.extend(cookie.to_be_bytes());
        b.extend(offset.to_be_bytes());
        b.extend(length.to_be_bytes());
        let h = RequestHeader::decode(&b).unwrap();
        prop_assert_eq!((h.flags, h.command.to_u16(), h.cookie, h.offset, h.length), (flags, kind, cookie, offset, length));
        prop_assert_eq!(Command::from_u16(kind).to_u16(), kind);
    }

    #[test]
    fn option_headers_and_client_flags_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
        if let Ok(h) = OptionHeader::decode(&bytes) {
            prop_assert_eq!(&h.encode()[..], &bytes[..16]);
            prop_assert!(h.len <= MAX_OPTION_BYTES);
        }
        if let Ok(flags) = decode_client_flags(&bytes) {
            // Only FIXED_NEWSTYLE (required) and NO_ZEROES are known client flags.
            prop_assert_eq!(flags & !0b11, 0);
            prop_assert_eq!(flags & 1, 1);
        }
        let _ = decode_option_reply_header(&bytes);
        let _ = SimpleReply::decode(&bytes);
    }

    #[test]
    fn option_headers_round_trip(option in any::<u32>(), len in any::<u32>()) {
        let mut b = b"IHAVEOPT".to_vec();
        b.extend(option.to_be_bytes());
        b.extend(len.to_be_bytes());
        match OptionHeader::decode(&b) {
            Ok(h) => {
                prop_assert_eq!((h.option, h.len), (option, len));
                prop_assert_eq!(&h.encode()[..], &b[..]);
            }
            // Longer option data than the gateway reads is refused, never buffered.
            Err(e) => prop_assert!(len > MAX_OPTION_BYTES, "{e}"),
        }
    }

    #[test]
    fn option_data_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        // (Names that are not UTF-8 are read lossily: what decodes re-encodes to itself.)
        if let Ok(g) = GoRequest::decode(&bytes) {
            prop_assert_eq!(GoRequest::decode(&g.encode()), Ok(g));
        }
        if let Ok(m) = MetaContextRequest::decode(&bytes) {
            prop_assert!(m.name.len() <= 4 * 4096 && m.queries.iter().all(|q| q.len() <= 4 * 4096));
            prop_assert_eq!(MetaContextRequest::decode(&m.encode()), Ok(m));
        }
    }

    #[test]
    fn go_and_meta_context_requests_round_trip(
        name in "[a-z0-9/._-]{0,40}", info in proptest::collection::vec(any::<u16>(), 0..8),
        queries in proptest::collection::vec("[a-z:_]{0,30}", 0..5),
    ) {
        let go = GoRequest { name: name.clone(), info };
        prop_assert_eq!(GoRequest::decode(&go.encode()), Ok(go));
        let meta = MetaContextRequest { name, queries };
        prop_assert_eq!(MetaContextRequest::decode(&meta.encode()), Ok(meta));
    }

    #[test]
    fn shown_names_are_bounded(name in ".{0,400}") {
        // 64 characters, quoted and escaped (at most 10 bytes each: \u{10ffff}), and the length.
        prop_assert!(shown_name(&name).len() <= 64 * 10 + 40);
    }

    #[test]
    fn read_replies_cover_the_data_in_runs(
        blocks in proptest::collection::vec(prop_oneof![Just(None), any::<u8>().prop_map(Some)], 0..20),
        tail in 0usize..4096,
    ) {
        // Blocks of 4 KiB, each all zero (None) or holding one non-zero byte.
        let mut data = Vec::new();
        for b in &blocks {
            let mut block = vec![0u8; 4096];
            if let Some(x) = b {
                block[usize::from(*x) * 16] = 1;
            }
            data.extend(block);
        }
        data.extend(vec![0u8; tail]);
        let runs = data_runs(&data, 4096);
        let mut at = 0;
        for (i, &(off, len, hole)) in runs.iter().enumerate() {
            prop_assert_eq!(off, at);
            prop_assert!(len > 0);
            prop_assert_eq!(hole, data[off..off + len].iter().all(|&x| x == 0));
            if i > 0 {
                prop_assert_ne!(runs[i - 1].2, hole, "adjacent runs of one kind are merged");
            }
            at += len;
        }
        prop_assert_eq!(at, data.len());
    }
}
