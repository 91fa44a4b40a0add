//! Fixed newstyle negotiation (NBD's handshake): the options a client sends before it
//! picks an export (`STARTTLS`, `LIST`, `INFO` / `GO`, `STRUCTURED_REPLY`, meta
//! contexts), and who may use which export (allow lists, connection limits, seed 003's
//! admission control).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;

use super::conn_error::{read_msg, send, ConnError};
use super::shared::{ExportGuard, Shared};
use crate::config::TlsMode;
use crate::dmclock_wire::OPT_STORQOS_DMCLOCK;
use crate::export::Export;
use crate::protocol::*;
use crate::transport::{Peer, Stream};

pub(crate) fn find_export(shared: &Shared, name: &str) -> Option<Arc<Export>> {
    shared.exports.find(name)
}

/// Why a client may not use an export.
pub(crate) enum Refusal {
    /// An address not allowed, a limit: logged by the caller (once a minute).
    Policy(String),
    /// Seed 003's admission control refused the export's tenant: already logged once
    /// by [`Admission::admit`](crate::admission::Admission::admit).
    Admission(String),
}

impl Refusal {
    fn message(&self) -> &str {
        match self {
            Refusal::Policy(m) | Refusal::Admission(m) => m,
        }
    }
}

/// May the client at `peer` use `e` now: its allow-list, the per-export connection
/// limit (the slot is taken when it may), then the admission of its tenant (seed 003,
/// with an `fclb` policy). `Err` says why not.
pub(crate) fn admit(e: &Arc<Export>, peer: &Peer, shared: &Shared) -> std::result::Result<ExportGuard, Refusal> {
    if !e.allows(peer.ip()) {
        return Err(Refusal::Policy(not_allowed(e, peer)));
    }
    let max = shared.limits.max_connections_per_export.unwrap_or(usize::MAX);
    let took = e.connections.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < max).then_some(n + 1));
    let mut guard = match took {
        Ok(_) => ExportGuard(e.clone(), None),
        Err(_) => {
            return Err(Refusal::Policy(format!("export {} has its limit of {max} connections", shown_name(&e.name))))
        }
    };
    if let Some(a) = &shared.admission {
        // On refusal the guard drops here and gives the export slot back.
        guard.1 = a.admit(e.tenant, &shared.log).map_err(Refusal::Admission)?;
    }
    Ok(guard)
}

pub(crate) fn not_allowed(e: &Export, peer: &Peer) -> String {
    let who = peer.ip().map_or_else(|| peer.to_string(), |ip| ip.to_string());
    format!("address {who} is not allowed to use export {}", shown_name(&e.name))
}

/// What a client negotiated beyond its export.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Session {
    /// Structured replies (`NBD_OPT_STRUCTURED_REPLY`): reads answered in chunks.
    pub(crate) structured: bool,
    /// `base:allocation` selected for the export: `NBD_CMD_BLOCK_STATUS` answered.
    pub(crate) block_status: bool,
    /// storqos' dmClock extension ([`crate::dmclock_wire`]): δ and ρ after each request
    /// header, the phase after each reply header.
    pub(crate) dmclock: bool,
}

/// The negotiated connection: its stream (TLS or not), export, export slot, session.
pub(crate) type Negotiated = (Stream, Arc<Export>, ExportGuard, Session);

/// Fixed newstyle negotiation. `Ok(Some(..))` enters transmission; `Ok(None)` means
/// the client aborted or left.
pub(crate) async fn negotiate(
    mut stream: Stream,
    peer: &Peer,
    shared: &Shared,
) -> std::result::Result<Option<Negotiated>, ConnError> {
    send(&mut stream, &encode_greeting()).await?;
    let mut cf = [0u8; 4];
    if !read_msg(&mut stream, &mut cf, "client flags", true).await? {
        return Ok(None);
    }
    let no_zeroes = decode_client_flags(&cf)? & FLAG_C_NO_ZEROES != 0;
    let mut structured = false;
    let mut dmclock = false;
    // The export `base:allocation` was selected for, if any.
    let mut meta_for: Option<String> = None;
    let session = |e: &Export, structured: bool, dmclock: bool, meta_for: &Option<String>| Session {
        structured,
        block_status: structured && meta_for.as_deref() == Some(e.name.as_str()),
        dmclock,
    };
    loop {
        let mut hb = [0u8; OPTION_HEADER_LEN];
        if !read_msg(&mut stream, &mut hb, "option request", true).await? {
            return Ok(None);
        }
        let h = OptionHeader::decode(&hb)?;
        let mut data = vec![0u8; h.len as usize];
        read_msg(&mut stream, &mut data, "option data", false).await?;
        let tls_wanted = shared.tls_mode == TlsMode::Require && !stream.is_tls();
        match h.option {
            OPT_STARTTLS => {
                let Some(acceptor) = shared.tls.clone() else {
                    let msg = b"TLS is not configured on this gateway";
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_UNSUP, msg)).await?;
                    continue;
                };
                if stream.is_tls() || !data.is_empty() {
                    let msg: &[u8] =
                        if stream.is_tls() { b"TLS is already on" } else { b"NBD_OPT_STARTTLS takes no data" };
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_INVALID, msg)).await?;
                    continue;
                }
                send(&mut stream, &encode_option_reply(h.option, REP_ACK, &[])).await?;
                stream = match stream {
                    Stream::Plain(plain) => Stream::Tls(Box::new(
                        acceptor
                            .accept(plain)
                            .await
                            .map_err(|e| ConnError::Refused(format!("TLS handshake failed: {e}")))?,
                    )),
                    tls => tls,
                };
                // Whatever was negotiated in the clear may have been injected by someone
                // on the path (the class of nbdkit's CVE-2021-3716): the client that now
                // speaks TLS negotiates again what it wants.
                structured = false;
                dmclock = false;
                meta_for = None;
            }
            OPT_ABORT => {}
            OPT_EXPORT_NAME if tls_wanted => {
                // No error reply exists for NBD_OPT_EXPORT_NAME: the spec has the server close.
                return Err(ConnError::Refused("NBD_OPT_EXPORT_NAME without TLS, which this gateway requires".into()));
            }
            _ if tls_wanted => {
                let msg = b"this gateway requires TLS: start it with NBD_OPT_STARTTLS first";
                send(&mut stream, &encode_option_reply(h.option, REP_ERR_TLS_REQD, msg)).await?;
                continue;
            }
            _ => {}
        }
        match h.option {
            OPT_STARTTLS => {}
            OPT_EXPORT_NAME => {
                let name = String::from_utf8_lossy(&data).into_owned();
                let Some(e) = find_export(shared, &name) else {
                    return Err(ProtocolError::UnknownExport(name).into());
                };
                // The spec gives NBD_OPT_EXPORT_NAME no error reply: a refusal closes.
                let slot = admit(&e, peer, shared).map_err(|r| match r {
                    Refusal::Policy(why) => ConnError::Refused(why),
                    Refusal::Admission(_) => ConnError::Said,
                })?;
                send(&mut stream, &encode_export_name_reply(e.size, e.transmission_flags(), no_zeroes)).await?;
                let s = session(&e, structured, dmclock, &meta_for);
                return Ok(Some((stream, e, slot, s)));
            }
            OPT_ABORT => {
                // The spec asks for an ACK; the client may already be gone.
                let _ = stream.write_all(&encode_option_reply(OPT_ABORT, REP_ACK, &[])).await;
                return Ok(None);
            }
            OPT_LIST => {
                if !data.is_empty() {
                    let msg = b"NBD_OPT_LIST takes no data";
                    send(&mut stream, &encode_option_reply(OPT_LIST, REP_ERR_INVALID, msg)).await?;
                    continue;
                }
                let mut out = Vec::new();
                for e in shared.exports.all().iter().filter(|e| e.allows(peer.ip())) {
                    out.extend(encode_option_reply(OPT_LIST, REP_SERVER, &encode_server_entry(&e.name)));
                }
                out.extend(encode_option_reply(OPT_LIST, REP_ACK, &[]));
                send(&mut stream, &out).await?;
            }
            OPT_INFO | OPT_GO => {
                let go = match GoRequest::decode(&data) {
                    Ok(g) => g,
                    Err(msg) => {
                        send(&mut stream, &encode_option_reply(h.option, REP_ERR_INVALID, msg.as_bytes())).await?;
                        continue;
                    }
                };
                // An export the client's address may not use is answered as one that
                // does not exist (it is not listed to it either): the answer tells
                // nothing of what is served to others.
                let found = find_export(shared, &go.name);
                let Some(e) = found.clone().filter(|e| e.allows(peer.ip())) else {
                    if let Some(hidden) = &found {
                        let why = not_allowed(hidden, peer);
                        shared.notices.say(&shared.log, "refused", || {
                            format!("client {peer}: {why}; answered as an unknown export (said once a minute)")
                        });
                    }
                    let msg = format!("no export named {}", shown_name(&go.name));
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_UNKNOWN, msg.as_bytes())).await?;
                    continue;
                };
                let slot = if h.option == OPT_GO { Some(admit(&e, peer, shared)) } else { None };
                if let Some(Err(why)) = &slot {
                    if let Refusal::Policy(why) = why {
                        shared
                            .notices
                            .say(&shared.log, "refused", || format!("client {peer}: {why} (said once a minute)"));
                    }
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_POLICY, why.message().as_bytes())).await?;
                    continue;
                }
                let flags = e.transmission_flags();
                let mut out = encode_option_reply(h.option, REP_INFO, &encode_info_export(e.size, flags));
                if go.info.contains(&INFO_BLOCK_SIZE) {
                    out.extend(encode_option_reply(h.option, REP_INFO, &encode_info_block_size()));
                }
                out.extend(encode_option_reply(h.option, REP_ACK, &[]));
                send(&mut stream, &out).await?;
                if let Some(Ok(slot)) = slot {
                    let s = session(&e, structured, dmclock, &meta_for);
                    return Ok(Some((stream, e, slot, s)));
                }
            }
            OPT_STRUCTURED_REPLY => {
                if !data.is_empty() {
                    let msg = b"NBD_OPT_STRUCTURED_REPLY takes no data";
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_INVALID, msg)).await?;
                    continue;
                }
                if dmclock {
                    let msg = b"the storqos dmClock extension frames replies simply: not with structured replies";
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_INVALID, msg)).await?;
                    continue;
                }
                structured = true;
                send(&mut stream, &encode_option_reply(h.option, REP_ACK, &[])).await?;
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                let setting = h.option == OPT_SET_META_CONTEXT;
                if !structured {
                    let msg = b"negotiate structured replies (NBD_OPT_STRUCTURED_REPLY) first";
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_INVALID, msg)).await?;
                    continue;
                }
                let q = match MetaContextRequest::decode(&data) {
                    Ok(q) => q,
                    Err(msg) => {
                        send(&mut stream, &encode_option_reply(h.option, REP_ERR_INVALID, msg.as_bytes())).await?;
                        continue;
                    }
                };
                let Some(e) = find_export(shared, &q.name).filter(|e| e.allows(peer.ip())) else {
                    let msg = format!("no export named {}", shown_name(&q.name));
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_UNKNOWN, msg.as_bytes())).await?;
                    continue;
                };
                let selected = q.selects_base_allocation(!setting);
                let mut out = Vec::new();
                if selected {
                    // Listed contexts carry id 0 (the spec reserves it there).
                    let id = if setting { BASE_ALLOCATION_ID } else { 0 };
                    out.extend(encode_option_reply(
                        h.option,
                        REP_META_CONTEXT,
                        &encode_meta_context(id, BASE_ALLOCATION),
                    ));
                }
                out.extend(encode_option_reply(h.option, REP_ACK, &[]));
                send(&mut stream, &out).await?;
                if setting {
                    meta_for = selected.then(|| e.name.clone());
                }
            }
            OPT_STORQOS_DMCLOCK => {
                let msg: &[u8] = if !data.is_empty() {
                    b"the storqos dmClock option takes no data"
                } else if structured {
                    b"the storqos dmClock extension frames replies simply: not with structured replies"
                } else {
                    dmclock = true;
                    send(&mut stream, &encode_option_reply(h.option, REP_ACK, &[])).await?;
                    continue;
                };
                send(&mut stream, &encode_option_reply(h.option, REP_ERR_INVALID, msg)).await?;
            }
            other => {
                let msg = format!("option {other} is not supported");
                send(&mut stream, &encode_option_reply(other, REP_ERR_UNSUP, msg.as_bytes())).await?;
            }
        }
    }
}
