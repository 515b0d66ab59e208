//! A route's events API: which provider's file answers each question a
//! run asks (the first page, the next, a re-send, an error's words).

use super::wire::{json_text, ApiError, ApiRequest, ApiResponse, ListedEvent, Page, Window};
use super::{github, paddle, paypal, square, stripe, ReconcileConfig, Source};

/// A route's events API: the requests a run sends and how their answers
/// read, for the route's source.
pub struct EventsApi<'a> {
    pub config: &'a ReconcileConfig,
}

impl EventsApi<'_> {
    fn base(&self) -> &str {
        &self.config.api_base
    }

    /// A request to run first for an access token (PayPal's OAuth client
    /// credentials); `None` when the key is used as it is.
    pub fn token_request(&self) -> Option<ApiRequest> {
        match self.config.source {
            Source::Paypal => Some(paypal::token_request(
                self.base(),
                self.config.api_key.expose(),
            )),
            _ => None,
        }
    }

    pub fn read_token(&self, response: &ApiResponse) -> Result<String, ApiError> {
        paypal::read_token(response)
    }

    /// The request for the page at `cursor` (the first with `None`).
    /// `token` is what [`EventsApi::read_token`] gave, if anything.
    pub fn list(&self, window: Window, cursor: Option<&str>, token: Option<&str>) -> ApiRequest {
        let credential = token.unwrap_or(self.config.api_key.expose());
        let types = &self.config.types;
        match self.config.source {
            Source::Stripe => stripe::list(self.base(), credential, window, types, cursor),
            Source::Square => square::list(self.base(), credential, window, types, cursor),
            Source::Paddle => paddle::list(
                self.base(),
                credential,
                window,
                self.config.endpoint.as_deref().unwrap_or_default(),
                cursor,
            ),
            Source::Paypal => paypal::list(self.base(), credential, window, types, cursor),
            Source::Github => github::list(
                self.base(),
                credential,
                self.config.endpoint.as_deref().unwrap_or_default(),
                cursor,
            ),
        }
    }

    /// The page an answer holds, only its events inside `window`; or the
    /// API's error.
    pub fn read_page(&self, window: Window, response: &ApiResponse) -> Result<Page, ApiError> {
        let mut page = match self.config.source {
            Source::Stripe => stripe::read_page(response),
            Source::Square => square::read_page(response),
            Source::Paddle => paddle::read_page(response, self.base()),
            Source::Paypal => paypal::read_page(response, self.base()),
            Source::Github => github::read_page(response, window, self.base()),
        }?;
        // A GitHub event is placed by its first delivery, which may be on a
        // later page: the run places it once all of it is read.
        if self.config.source != Source::Github {
            page.events.retain(|event| window.contains(event.created));
        }
        Ok(page)
    }

    /// The request that asks the provider to re-send `event`.
    pub fn resend(&self, event: &ListedEvent, token: Option<&str>) -> Option<ApiRequest> {
        let credential = token.unwrap_or(self.config.api_key.expose());
        let id = event.resend_id.as_deref()?;
        match self.config.source {
            Source::Paddle => Some(paddle::resend(self.base(), credential, id)),
            Source::Paypal => Some(paypal::resend(
                self.base(),
                credential,
                id,
                self.config.endpoint.as_deref(),
            )),
            Source::Github => Some(github::resend(
                self.base(),
                credential,
                self.config.endpoint.as_deref().unwrap_or_default(),
                id,
            )),
            Source::Stripe | Source::Square => None,
        }
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
        let message = match self.config.source {
            Source::Stripe => json_text(&response.body, &["/error/message"]),
            Source::Square => json_text(&response.body, &["/errors/0/detail", "/errors/0/code"]),
            Source::Paddle => json_text(&response.body, &["/error/detail", "/error/code"]),
            Source::Paypal => {
                json_text(&response.body, &["/message", "/error_description", "/name"])
            }
            Source::Github => json_text(&response.body, &["/message"]),
        };
        ApiError::of(response, message)
    }
}
