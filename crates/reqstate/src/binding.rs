//! What a token is bound to, and what a verifier expects of it: typed values,
//! checked once when they are built, so that a call cannot swap a tool name
//! for a step name and still compile.

use crate::context::CallContext;
use crate::error::InvalidArgument;
use crate::types::{MAX_CONTEXT_LEN, MAX_TOOL_LEN};

/// What a state token is bound to but does not carry: the tool it is for and
/// the caller's context (FORMAT.md §4, the associated data). A token verifies
/// only under the same binding it was minted under.
///
/// ```
/// use reqstate::{Arguments, Binding, Call, call_context};
///
/// let context = call_context(&Call {
///     principal: "user-42",
///     audience: "counter-server",
///     method: "tools/call",
///     arguments: Arguments::Json(r#"{"current":10}"#),
/// })?;
/// let binding = Binding::new("increase-counter", &context)?;
/// let expected = binding.step("confirm"); // what verify requires
/// # let _ = expected;
/// # Ok::<(), reqstate::InvalidArgument>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    tool: &'a str,
    context: &'a [u8],
}

impl<'a> Binding<'a> {
    /// Binds to `tool` (1 to [`MAX_TOOL_LEN`] bytes) and a call context
    /// ([`crate::call_context`]): the usual binding of an MCP tool call.
    pub fn new(tool: &'a str, context: &'a CallContext) -> Result<Self, InvalidArgument> {
        Self::with_context_bytes(tool, context.as_bytes())
    }

    /// Binds to `tool` and context bytes computed another way (at most
    /// [`MAX_CONTEXT_LEN`]; empty binds to no context). For callers that
    /// carry their own context, as the sidecar's clients do. Prefer
    /// [`Binding::new`] with [`crate::call_context`].
    pub fn with_context_bytes(tool: &'a str, context: &'a [u8]) -> Result<Self, InvalidArgument> {
        if tool.is_empty() {
            return Err(InvalidArgument("tool name is empty"));
        }
        if tool.len() > MAX_TOOL_LEN {
            return Err(InvalidArgument("tool name is longer than 256 bytes"));
        }
        if context.len() > MAX_CONTEXT_LEN {
            return Err(InvalidArgument("context is longer than 65536 bytes"));
        }
        Ok(Binding { tool, context })
    }

    /// The tool name.
    pub fn tool(&self) -> &'a str {
        self.tool
    }

    /// The context bytes.
    pub fn context(&self) -> &'a [u8] {
        self.context
    }

    /// What to verify against: this binding, and a token for exactly `step`
    /// (otherwise [`crate::Refusal::WrongStep`]).
    pub fn step(self, step: &'a str) -> Expected<'a> {
        Expected {
            binding: self,
            step: Some(step),
        }
    }

    /// What to verify against: this binding, a token for any step (the
    /// caller reads [`crate::Verified::step`] and decides).
    pub fn any_step(self) -> Expected<'a> {
        Expected {
            binding: self,
            step: None,
        }
    }

    /// [`Binding::step`] when a step is given, [`Binding::any_step`] when
    /// not: for callers whose expected step is optional input (a gRPC
    /// field, a command-line flag, a Python keyword).
    pub fn expecting(self, step: Option<&'a str>) -> Expected<'a> {
        Expected {
            binding: self,
            step,
        }
    }
}

/// What a verifier requires of a state token: its [`Binding`] and, if given,
/// its step. Built with [`Binding::step`], [`Binding::any_step`] or
/// [`Binding::expecting`]: there is deliberately no conversion from a bare
/// [`Binding`], so that accepting a token of any step is always written out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected<'a> {
    binding: Binding<'a>,
    step: Option<&'a str>,
}

impl<'a> Expected<'a> {
    /// The binding.
    pub fn binding(&self) -> Binding<'a> {
        self.binding
    }

    /// The step required, if any.
    pub fn step(&self) -> Option<&'a str> {
        self.step
    }
}

/// The associated data a sealed payload is bound to (FORMAT.md §6), at most
/// [`MAX_CONTEXT_LEN`] bytes: authenticated, never stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aad<'a>(&'a [u8]);

impl<'a> Aad<'a> {
    /// No associated data.
    pub const EMPTY: Aad<'static> = Aad(b"");

    /// Associated data of at most [`MAX_CONTEXT_LEN`] bytes.
    pub fn new(bytes: &'a [u8]) -> Result<Self, InvalidArgument> {
        if bytes.len() > MAX_CONTEXT_LEN {
            return Err(InvalidArgument(
                "associated data is longer than 65536 bytes",
            ));
        }
        Ok(Aad(bytes))
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_check_their_arguments_once() {
        let long_tool = "t".repeat(MAX_TOOL_LEN + 1);
        let long_context = alloc::vec![0u8; MAX_CONTEXT_LEN + 1];
        assert!(Binding::with_context_bytes("", b"").is_err());
        assert!(Binding::with_context_bytes(&long_tool, b"").is_err());
        assert!(Binding::with_context_bytes(&long_tool[1..], b"").is_ok());
        assert!(Binding::with_context_bytes("t", &long_context).is_err());
        assert!(Binding::with_context_bytes("t", &long_context[1..]).is_ok());
        assert!(Aad::new(&long_context).is_err());
        assert!(Aad::new(&long_context[1..]).is_ok());
    }

    #[test]
    fn any_step_is_said_out_loud() {
        let binding = Binding::with_context_bytes("t", b"c").unwrap();
        assert_eq!(binding.any_step().step(), None);
        assert_eq!(binding.step("s").step(), Some("s"));
        assert_eq!(binding.expecting(None), binding.any_step());
        assert_eq!(binding.expecting(Some("s")), binding.step("s"));
    }
}
