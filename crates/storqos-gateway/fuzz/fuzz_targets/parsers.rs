//! Every NBD parser of the gateway on arbitrary bytes: the handshake's (client flags,
//! option headers, NBD_OPT_GO / INFO data, meta-context queries) and the transmission
//! phase's (request headers), as the server reads them: a stream of messages. A
//! decoder returns a value or an error; it must never panic, and what it decodes must
//! encode back to the bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storqos_gateway::protocol::*;

fuzz_target!(|data: &[u8]| {
    let mut at = 0usize;
    let take = |at: &mut usize, n: usize| -> Option<&[u8]> {
        let b = data.get(*at..*at + n)?;
        *at += n;
        Some(b)
    };
    // Handshake: client flags, then options until the data runs out.
    if let Some(cf) = take(&mut at, 4) {
        if let Ok(flags) = decode_client_flags(cf) {
            assert_eq!(flags & !0b11, 0, "unknown client flags accepted");
        }
    }
    while let Some(hb) = take(&mut at, OPTION_HEADER_LEN) {
        let Ok(h) = OptionHeader::decode(hb) else { break };
        assert_eq!(&h.encode()[..], hb);
        assert!(h.len <= MAX_OPTION_BYTES);
        let Some(body) = take(&mut at, h.len as usize) else { break };
        if let Ok(go) = GoRequest::decode(body) {
            assert_eq!(go.encode(), body);
            assert!(shown_name(&go.name).len() <= 64 * 10 + 40);
        }
        if let Ok(meta) = MetaContextRequest::decode(body) {
            assert_eq!(MetaContextRequest::decode(&meta.encode()), Ok(meta.clone()));
            let _ = meta.selects_base_allocation(true);
        }
    }
    // Transmission: request headers (and a write's payload), from where the handshake
    // stopped; then the same bytes read as a read's data for structured replies.
    let mut at2 = at.min(data.len());
    while let Some(hb) = data.get(at2..at2 + REQUEST_LEN) {
        at2 += REQUEST_LEN;
        let Ok(h) = RequestHeader::decode(hb) else { break };
        assert_eq!(&h.encode()[..], hb);
        assert_eq!(Command::from_u16(h.command.to_u16()), h.command);
        if h.command == Command::Write {
            assert!(h.length <= MAX_IO_BYTES);
            at2 += h.length as usize;
        }
    }
    let runs = data_runs(data, 4096);
    assert_eq!(runs.iter().map(|r| r.1).sum::<usize>(), data.len());
});
