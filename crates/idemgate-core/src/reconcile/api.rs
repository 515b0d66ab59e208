//! A route's events API: each question a run asks (the first page, the
//! next, a re-send, an error's words), answered by the route's source's
//! entry ([`super::SourceEntry`]).

use super::source::{Listed, ReconcileConfig, SourceEntry};
use super::wire::{json_text, ApiError, ApiRequest, ApiResponse, ListedEvent, Page, Window};

/// A route's events API: the requests a run sends and how their answers
/// read, for the route's source.
pub struct EventsApi<'a> {
    pub config: &'a ReconcileConfig,
}

impl ReconcileConfig {
    pub fn api(&self) -> EventsApi<'_> {
        EventsApi { config: self }
    }
}

impl EventsApi<'_> {
    fn source(&self) -> &'static SourceEntry {
        self.config.source.entry()
    }

    fn base(&self) -> &str {
        &self.config.api_base
    }

    /// A request to run first for an access token (PayPal's OAuth client
    /// credentials); `None` when the key is used as it is.
    pub fn token_request(&self) -> Option<ApiRequest> {
        let token = self.source().token?;
        Some((token.request)(self.base(), self.config.api_key.expose()))
    }

    /// The token the answer to [`EventsApi::token_request`] holds.
    pub fn read_token(&self, response: &ApiResponse) -> Result<String, ApiError> {
        match self.source().token {
            Some(token) => (token.read)(response),
            None => Err(ApiError::unreadable("the API gives no token")),
        }
    }

    /// The request for the page at `cursor` (the first with `None`).
    /// `token` is what [`EventsApi::read_token`] gave, if anything.
    pub fn list(&self, window: Window, cursor: Option<&str>, token: Option<&str>) -> ApiRequest {
        let credential = token.unwrap_or(self.config.api_key.expose());
        (self.source().list)(self.config, credential, window, cursor)
    }

    /// The page an answer holds, only its events inside `window`; or the
    /// API's error.
    pub fn read_page(&self, window: Window, response: &ApiResponse) -> Result<Page, ApiError> {
        let mut page = (self.source().read_page)(self.config, window, response)?;
        // An event listed by its deliveries is placed by its first, which
        // may be on a later page: the run places it once all of it is read.
        if self.source().lists == Listed::Events {
            page.events.retain(|event| window.contains(event.created));
        }
        Ok(page)
    }

    /// The request that asks the provider to re-send `event`.
    pub fn resend(&self, event: &ListedEvent, token: Option<&str>) -> Option<ApiRequest> {
        let credential = token.unwrap_or(self.config.api_key.expose());
        let id = event.resend_id.as_deref()?;
        let resend = self.source().resend?;
        Some(resend(self.config, credential, id))
    }

    /// Whether the provider took a re-send request (GitHub, PayPal and
    /// Paddle answer 202).
    pub fn read_resend(&self, response: &ApiResponse) -> Result<(), ApiError> {
        match response.status {
            200..=299 => Ok(()),
            _ => Err(self.error(response)),
        }
    }

    /// The API's error, in its own words where its body says them.
    pub fn error(&self, response: &ApiResponse) -> ApiError {
        ApiError::of(
            response,
            json_text(&response.body, self.source().error_text),
        )
    }
}
