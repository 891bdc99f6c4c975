//! The Gemini listener's other URLs: `gopher://`, `spartan://` and `nex://`,
//! as Gemini clients' proxy settings send them (AV-98's `gopher_proxy`,
//! Lagrange's and amfora's). Each is fetched over its own protocol, after the
//! same checks as through any other way in (its own robots.txt, the
//! machine's politeness gate), and answered as Gemini: a `20 <mime>` header,
//! Gopher menus and Nex listings rendered as `text/gemini` ([`gemtext`]),
//! Spartan's status line turned into Gemini's, refusals as the Gemini
//! listener's.

pub mod gemtext;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::admission::Admitted;
use crate::bots::BotId;
use crate::context::Context;
use crate::fate::Fate;
use crate::protocols::gemini::wire::{header, BadRequest};
use crate::protocols::gopher::menu::MenuLines;
use crate::protocols::{gopher, nex, spartan};
use crate::proxy::{
    ask_line, exchange, relay_answer, relay_line, Hangup, Outcome, Streamed, Transform, Upstream,
};
use crate::refusal::{Malformed, ProxyRule, Refusal};
use crate::robots::encoding::percent_decode;
use crate::target::{Resource, Scheme, Target};

/// The gateway as the Gemini listener takes it: Gopher, Spartan and Nex
/// URLs (wired in by the server).
pub enum OtherProtocols {}

impl crate::protocols::gemini::serve::OtherUrls for OtherProtocols {
    type Request = Request;

    fn request(url: &str, target: Target) -> Option<Result<Request, Malformed>> {
        match target.scheme {
            Scheme::Gopher | Scheme::Spartan | Scheme::Nex => Some(Request::new(url, target)),
            _ => None,
        }
    }

    fn target(request: &Request) -> &Target {
        request.target()
    }

    fn process<S: AsyncRead + AsyncWrite + Unpin + Send>(
        client: &mut BufReader<S>,
        bot: BotId,
        request: &Request,
        ctx: &Context,
    ) -> impl std::future::Future<Output = Outcome> + Send {
        process(client, (bot, request), ctx)
    }
}

/// A request on the Gemini listener for another protocol's URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Gopher(gopher::wire::Request),
    Spartan(spartan::wire::Request),
    Nex(nex::wire::Request),
}

impl Request {
    /// The request for `target`, parsed from `url` (a gateway scheme's).
    /// A `?query` on a Gopher search (type 7) is its search terms, as a
    /// Gemini client sends the answer to the prompt; a Spartan URL's query
    /// is its data, as Spartan clients send it.
    pub fn new(url: &str, target: Target) -> Result<Request, Malformed> {
        match target.scheme {
            Scheme::Gopher => Ok(Request::Gopher(gopher_search(url, target)?)),
            Scheme::Spartan => Ok(Request::Spartan(spartan::wire::Request::from_url(target)?)),
            Scheme::Nex => Ok(Request::Nex(nex::wire::Request { target })),
            other => Err(BadRequest::NotGemini(other.as_str()).into()),
        }
    }

    pub fn target(&self) -> &Target {
        match self {
            Request::Gopher(r) => &r.target,
            Request::Spartan(r) => &r.target,
            Request::Nex(r) => &r.target,
        }
    }
}

/// A Gopher URL's request; for a search (type 7), a literal `?` starts
/// its terms (a selector's own `?` is written `%3F` in a Gopher URL).
fn gopher_search(url: &str, target: Target) -> Result<gopher::wire::Request, BadRequest> {
    let searching = matches!(
        target.resource,
        Resource::Gopher {
            item_type: b'7',
            ..
        }
    );
    let request = match url.split_once('?') {
        Some((before, terms)) if searching => {
            let mut target = crate::protocols::gemini::wire::parse_url(before.as_bytes())?;
            let Resource::Gopher { search, .. } = &mut target.resource else {
                return Err(BadRequest::NotGemini("gopher"));
            };
            let terms = percent_decode(terms.as_bytes());
            if terms
                .iter()
                .any(|&b| matches!(b, b'\r' | b'\n' | 0 | b'\t'))
            {
                return Err(BadRequest::Target(
                    crate::target::TargetError::ControlCharacter,
                ));
            }
            *search = Some(terms);
            gopher::wire::Request {
                target,
                after_tab: None,
            }
        }
        _ => gopher::wire::Request {
            target,
            after_tab: None,
        },
    };
    Ok(request)
}

/// Serves an admitted client's request: an upload refused for a bot that may
/// not upload, a search without terms asked for them (`10`), then the shared
/// checks and the relay.
pub async fn process<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut BufReader<S>,
    (bot, request): (BotId, &Request),
    ctx: &Context,
) -> Outcome {
    match request {
        Request::Spartan(r)
            if r.uploads() && !ctx.admission.config.bots.get(bot).limits.uploads =>
        {
            let refusal = Refusal::ProxyRule(ProxyRule::Upload {
                what: "a spartan:// URL with a query (data)",
            });
            return crate::protocols::gemini::answer::answer(client.get_mut(), &refusal).await;
        }
        Request::Gopher(r) if r.item_type() == b'7' && !has_search(&r.target) => {
            return prompt(client.get_mut()).await;
        }
        _ => {}
    }
    let gateway = Gateway { ctx, request };
    exchange(ctx, (bot, request.target()), client, &gateway).await
}

fn has_search(target: &Target) -> bool {
    matches!(
        &target.resource,
        Resource::Gopher {
            search: Some(_),
            ..
        }
    )
}

/// A Gopher search asked for without its terms: Gemini's `10` asks the
/// client for them; it comes back with them as the URL's query. Nothing is
/// fetched.
async fn prompt<W: AsyncWrite + Unpin>(client: &mut W) -> Outcome {
    let _ = client.write_all(&header(10, "Search terms")).await;
    let _ = client.flush().await;
    Outcome::new(
        Fate::Malformed,
        Some(10),
        "a Gopher search without its terms: asked for them (10)".into(),
    )
}

/// The gateway's part of the exchange: each protocol asked its own way,
/// answered as Gemini (a refusal as the Gemini listener's). Their servers
/// say nothing of their load.
struct Gateway<'a> {
    ctx: &'a Context,
    request: &'a Request,
}

/// An upstream that has begun to answer, by protocol, with its request.
enum Head<'a> {
    /// The answer's first bytes have come.
    Gopher(Upstream, &'a gopher::wire::Request),
    Nex(Upstream, &'a nex::wire::Request),
    /// Its status line has come.
    Spartan(spartan::serve::Answered, &'a spartan::wire::Request),
}

impl<'a, S: AsyncRead + AsyncWrite + Unpin> Streamed<S> for Gateway<'a> {
    type Head = Head<'a>;

    fn hangup(&self) -> Hangup {
        Hangup::OnEof
    }

    async fn ask(
        &self,
        client: &mut BufReader<S>,
        admitted: &Admitted,
    ) -> Result<Head<'a>, Refusal> {
        let ctx = self.ctx;
        match self.request {
            Request::Gopher(r) => {
                let line = r.upstream_line();
                let what = (&r.target, line.as_slice(), "selector");
                Ok(Head::Gopher(ask_line(what, admitted, ctx).await?, r))
            }
            Request::Nex(r) => {
                let line = r.upstream_line();
                let what = (&r.target, line.as_slice(), "path");
                Ok(Head::Nex(ask_line(what, admitted, ctx).await?, r))
            }
            Request::Spartan(r) => {
                let answered = spartan::serve::ask(client, r, admitted, ctx).await?;
                Ok(Head::Spartan(answered, r))
            }
        }
    }

    async fn relay(&self, client: &mut BufReader<S>, head: Head<'a>) -> Outcome {
        let ctx = self.ctx;
        match head {
            Head::Gopher(upstream, r) => {
                let selector = r.target.matched_path();
                let mime = gemtext::gopher_mime(r.item_type(), selector);
                let menu = r.answer_is_menu().then(gemtext::gopher_menu);
                relay_as_gemini(client, upstream, ctx, (mime, menu)).await
            }
            Head::Nex(upstream, r) => {
                let path = r.target.matched_path();
                let mime = gemtext::nex_mime(path);
                let listing = gemtext::nex_is_listing(path).then(gemtext::nex_listing);
                relay_as_gemini(client, upstream, ctx, (mime, listing)).await
            }
            Head::Spartan(mut answered, r) => {
                let said = &answered.header;
                let (status, meta) = gemini_for_spartan(said.status, &said.meta, &r.target);
                let head = header(status, &meta);
                // Without its line end: `relay_answer` writes the line's.
                let line = (&head[..head.len() - 2], status);
                let upstream = &mut answered.upstream;
                let connecting = answered.connecting;
                relay_answer(upstream, client.get_mut(), line, ctx, connecting).await
            }
        }
    }

    async fn refuse(&self, client: &mut S, refusal: &Refusal) -> Outcome {
        crate::protocols::gemini::answer::answer(client, refusal).await
    }
}

/// A Spartan status line as Gemini's: `2` success → `20`, `3` redirect (a
/// path on the same server) → `30` to its `spartan://` URL, `4` client
/// error → `50`, `5` server error → `40` (the generic statuses: Spartan's
/// say no more).
pub fn gemini_for_spartan(status: u8, meta: &str, target: &Target) -> (u8, String) {
    match status {
        2 => (20, meta.to_string()),
        3 => match Target::with_path(Scheme::Spartan, target.host.clone(), target.port, meta) {
            Ok(to) => (30, to.url()),
            // A redirect to a path no request may name is not passed on.
            Err(e) => (
                43,
                format!("the server redirected to a path the proxy refuses: {e}"),
            ),
        },
        4 => (50, meta.to_string()),
        _ => (40, meta.to_string()),
    }
}

/// The relay of a one-line protocol (Gopher, Nex) to a Gemini client: the
/// header `20 <mime>` is written with the answer's first bytes (a server
/// that says nothing gets a `43`, not an empty success), then the answer,
/// rendered as gemtext by `render` where there is one.
async fn relay_as_gemini<S, H>(
    client: &mut BufReader<S>,
    upstream: Upstream,
    ctx: &Context,
    (mime, render): (&'static str, Option<MenuLines<H>>),
) -> Outcome
where
    S: AsyncRead + AsyncWrite + Unpin,
    H: crate::protocols::gopher::menu::MenuLine,
{
    let mut headed = Headed {
        head: Some(header(20, mime)),
        inner: render,
        out: Vec::new(),
    };
    let mut outcome = relay_line(client, upstream, ctx, &mut headed).await;
    outcome.status = Some(20);
    outcome
}

/// An answer with a header written before its first bytes.
struct Headed<T> {
    head: Option<Vec<u8>>,
    inner: T,
    out: Vec<u8>,
}

impl<T: Transform> Transform for Headed<T> {
    fn feed<'a>(&'a mut self, chunk: &'a [u8]) -> &'a [u8] {
        match self.head.take() {
            Some(mut head) => {
                head.extend_from_slice(self.inner.feed(chunk));
                self.out = head;
                &self.out
            }
            None => self.inner.feed(chunk),
        }
    }

    fn finish(&mut self) -> &[u8] {
        match self.head.take() {
            Some(mut head) => {
                head.extend_from_slice(self.inner.finish());
                self.out = head;
                &self.out
            }
            None => self.inner.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(url: &str) -> Result<Request, Malformed> {
        let target = crate::protocols::gemini::wire::parse_url(url.as_bytes())?;
        Request::new(url, target)
    }

    #[test]
    fn a_search_takes_its_terms_from_the_query() {
        let Ok(Request::Gopher(r)) = request("gopher://example.org/7/find?caf%C3%A9%20au%20lait")
        else {
            panic!("a Gopher request");
        };
        assert_eq!(r.upstream_line(), "/find\tcafé au lait\r\n".as_bytes());
        assert_eq!(r.target.matched_path(), b"/find");
        // Not a search: the `?` is the selector's.
        let Ok(Request::Gopher(r)) = request("gopher://example.org/0/a?b") else {
            panic!("a Gopher request");
        };
        assert_eq!(r.upstream_line(), b"/a?b\r\n");
        assert!(request("gopher://example.org/7/find?a%0Db").is_err());
        assert!(request("gopher://example.org/7/find?a%09b").is_err());
    }

    #[test]
    fn each_scheme_is_its_protocol() {
        assert!(matches!(
            request("nex://example.org/a/"),
            Ok(Request::Nex(_))
        ));
        let Ok(Request::Spartan(r)) = request("spartan://example.org/guest?hi%20there") else {
            panic!("a Spartan request");
        };
        assert!(r.uploads());
        assert_eq!(r.upstream_head(), b"example.org /guest 8\r\nhi there");
        assert!(request("gemini://example.org/").is_err());
    }

    #[test]
    fn spartan_statuses_become_gemini_statuses() {
        let t = Target::parse("spartan://example.org:3000/a/b").unwrap();
        assert_eq!(
            gemini_for_spartan(2, "text/gemini", &t),
            (20, "text/gemini".into())
        );
        assert_eq!(
            gemini_for_spartan(3, "/new/../place", &t),
            (30, "spartan://example.org:3000/place".into())
        );
        assert_eq!(
            gemini_for_spartan(4, "not found", &t),
            (50, "not found".into())
        );
        assert_eq!(gemini_for_spartan(5, "oops", &t), (40, "oops".into()));
    }
}
