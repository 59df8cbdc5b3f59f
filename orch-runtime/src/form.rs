//! The compiled form is declared once: [`compiled_form!`] takes a structure's fields, each
//! with its kind, and writes the borrowed structure the engine reads, the owned one built
//! at run time, the view from owned to borrowed, and the writer of the borrowed form as a
//! Rust literal (what generated code contains). A field added to a declaration is in all
//! four at once.
//!
//! Field kinds:
//!
//! | kind | borrowed | owned | literal |
//! |---|---|---|---|
//! | `value T` | `T` | `T` | [`Literal`] of `T` |
//! | `slice T` | `&'a [T]` | `Vec<T>` | `&[..]` |
//! | `text` | `&'a str` | `String` | a string literal |
//! | `names` | `&'a [S]` | `Vec<String>` | `&["..", ..]` |
//! | `nested B O` | `B<'a>` | `O` | `O`'s own literal |

use std::fmt::Write as _;

/// A value the compiler writes into generated code as a Rust expression (the literal
/// writer of the compiled form; see [`LiteralWriter`]).
pub trait Literal {
    /// Writes `self` as an expression to `w`.
    fn write_literal(&self, w: &mut LiteralWriter);
}

/// Where a literal is written: the source text so far, the path generated code reaches
/// the runtime's compiled form by (e.g. `__rt`), and fields written as given expressions
/// instead of their values (e.g. `tools` as `&TOOL_NAMES`, a constant the generated
/// module declares anyway).
#[derive(Debug)]
pub struct LiteralWriter<'o> {
    out: String,
    path: &'o str,
    overrides: &'o [(&'o str, &'o str)],
}

impl<'o> LiteralWriter<'o> {
    /// A writer for a module that reaches the compiled form as `path` (`path::Tables`
    /// ...), with fields (by name, at any depth) written as the given expressions.
    pub fn new(path: &'o str, overrides: &'o [(&'o str, &'o str)]) -> Self {
        LiteralWriter {
            out: String::new(),
            path,
            overrides,
        }
    }

    /// The source written so far.
    pub fn finish(self) -> String {
        self.out
    }

    /// Appends source text.
    pub fn text(&mut self, s: &str) {
        self.out.push_str(s);
    }

    /// Appends `path::item` (an item of the compiled form).
    pub fn item(&mut self, item: &str) {
        self.out.push_str(self.path);
        self.out.push_str("::");
        self.out.push_str(item);
    }

    /// Appends an unsuffixed integer.
    pub fn int(&mut self, n: impl std::fmt::Display) {
        let _ = write!(self.out, "{n}");
    }

    /// Appends `name: <value>, ` — or the field's override.
    pub fn field(&mut self, name: &str, value: &dyn Literal) {
        self.out.push_str(name);
        self.out.push_str(": ");
        match self.overrides.iter().find(|(n, _)| *n == name) {
            Some((_, expr)) => self.out.push_str(expr),
            None => value.write_literal(self),
        }
        self.out.push_str(", ");
    }

    /// Appends `&[a, b, ..]`.
    pub fn slice<T: Literal>(&mut self, items: &[T]) {
        self.out.push_str("&[");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            item.write_literal(self);
        }
        self.out.push(']');
    }
}

macro_rules! int_literal {
    ($($t:ty),*) => {$(
        impl Literal for $t {
            fn write_literal(&self, w: &mut LiteralWriter) {
                w.int(self)
            }
        }
    )*};
}
int_literal!(u8, u16, u32, u64, usize);

impl Literal for bool {
    fn write_literal(&self, w: &mut LiteralWriter) {
        w.text(if *self { "true" } else { "false" })
    }
}

impl Literal for str {
    fn write_literal(&self, w: &mut LiteralWriter) {
        // `escape_debug` writes only escapes a Rust string literal accepts.
        let _ = write!(w.out, "\"{}\"", self.escape_debug());
    }
}

impl Literal for String {
    fn write_literal(&self, w: &mut LiteralWriter) {
        self.as_str().write_literal(w)
    }
}

impl<T: Literal> Literal for Option<T> {
    fn write_literal(&self, w: &mut LiteralWriter) {
        match self {
            Some(v) => {
                w.text("::core::option::Option::Some(");
                v.write_literal(w);
                w.text(")");
            }
            None => w.text("::core::option::Option::None"),
        }
    }
}

impl<A: Literal, B: Literal> Literal for (A, B) {
    fn write_literal(&self, w: &mut LiteralWriter) {
        w.text("(");
        self.0.write_literal(w);
        w.text(", ");
        self.1.write_literal(w);
        w.text(")");
    }
}

impl<T: Literal> Literal for Vec<T> {
    fn write_literal(&self, w: &mut LiteralWriter) {
        w.slice(self)
    }
}

/// Declares a structure of the compiled form once (see the module docs): the borrowed
/// form `$B<'a>` (with an optional string type parameter for `names` fields), the owned
/// form `$O` with `view()`, and `Literal` for `$O` (written as a `$B` literal).
macro_rules! compiled_form {
    (
        $(#[$bmeta:meta])*
        pub struct $B:ident<$lt:lifetime $(, $S:ident : $Slt:lifetime = $Sdef:ty)?>;
        $(#[$ometa:meta])*
        pub struct $O:ident;
        { $($fields:tt)* }
    ) => {
        compiled_form! {
            @go
            [$(#[$bmeta])*] $B $lt [$(, $S: $Slt = $Sdef)?] [$($S)?]
            [$(#[$ometa])*] $O
            { $($fields)* }
        }
    };

    (
        @go
        [$($bmeta:tt)*] $B:ident $lt:lifetime [$($generics:tt)*] $S:tt
        [$($ometa:tt)*] $O:ident
        { $($fields:tt)* }
    ) => {
        compiled_form! {
            @types
            ([$($bmeta)*] $B $lt [$($generics)*] $S [$($ometa)*] $O { $($fields)* })
            $B $lt $S [] []
            $($fields)*
        }
    };

    // The field types, one field at a time (a type written by a macro call would keep
    // `derive` off the structures).
    (
        @types $ctx:tt $B:ident $lt:lifetime $S:tt [$($b:tt)*] [$($o:tt)*]
        $(#[$m:meta])* $f:ident: $kind:ident $(($($arg:tt)*))? $(, $($rest:tt)*)?
    ) => {
        compiled_form! {
            @field ($kind $($($arg)*)?)
            $ctx $B $lt $S [$($b)*] [$($o)*] [$(#[$m])*] $f
            [$($($rest)*)?]
        }
    };
    (@types ($($ctx:tt)*) $B:ident $lt:lifetime $S:tt [$($b:tt)*] [$($o:tt)*]) => {
        compiled_form! { @emit $($ctx)* [$($b)*] [$($o)*] }
    };

    (@field (value $t:ty) $ctx:tt $B:ident $lt:lifetime $S:tt [$($b:tt)*] [$($o:tt)*] [$($m:tt)*] $f:ident [$($rest:tt)*]) => {
        compiled_form! { @next $ctx $B $lt $S [$($b)*] [$($o)*] [$($m)*] $f ($t) ($t) [$($rest)*] }
    };
    (@field (slice $t:ty) $ctx:tt $B:ident $lt:lifetime $S:tt [$($b:tt)*] [$($o:tt)*] [$($m:tt)*] $f:ident [$($rest:tt)*]) => {
        compiled_form! { @next $ctx $B $lt $S [$($b)*] [$($o)*] [$($m)*] $f (&$lt [$t]) (Vec<$t>) [$($rest)*] }
    };
    (@field (text) $ctx:tt $B:ident $lt:lifetime $S:tt [$($b:tt)*] [$($o:tt)*] [$($m:tt)*] $f:ident [$($rest:tt)*]) => {
        compiled_form! { @next $ctx $B $lt $S [$($b)*] [$($o)*] [$($m)*] $f (&$lt str) (String) [$($rest)*] }
    };
    (@field (names) $ctx:tt $B:ident $lt:lifetime [$S:ident] [$($b:tt)*] [$($o:tt)*] [$($m:tt)*] $f:ident [$($rest:tt)*]) => {
        compiled_form! { @next $ctx $B $lt [$S] [$($b)*] [$($o)*] [$($m)*] $f (&$lt [$S]) (Vec<String>) [$($rest)*] }
    };
    (@field (nested $nb:ident $no:ident) $ctx:tt $B:ident $lt:lifetime $S:tt [$($b:tt)*] [$($o:tt)*] [$($m:tt)*] $f:ident [$($rest:tt)*]) => {
        compiled_form! { @next $ctx $B $lt $S [$($b)*] [$($o)*] [$($m)*] $f ($nb<$lt>) ($no) [$($rest)*] }
    };
    (@next $ctx:tt $B:ident $lt:lifetime $S:tt [$($b:tt)*] [$($o:tt)*] [$($m:tt)*] $f:ident ($($bt:tt)*) ($($ot:tt)*) [$($rest:tt)*]) => {
        compiled_form! {
            @types $ctx $B $lt $S
            [$($b)* $($m)* pub $f: $($bt)*,]
            [$($o)* #[doc = concat!("See [`", stringify!($B), "::", stringify!($f), "`].")] pub $f: $($ot)*,]
            $($rest)*
        }
    };

    (
        @emit
        [$($bmeta:tt)*] $B:ident $lt:lifetime [$($generics:tt)*] $S:tt
        [$($ometa:tt)*] $O:ident
        {
            $(
                $(#[$fmeta:meta])*
                $f:ident: $kind:ident $(($($arg:tt)*))?
            ),* $(,)?
        }
        [$($b:tt)*] [$($o:tt)*]
    ) => {
        $($bmeta)*
        pub struct $B<$lt $($generics)*> {
            $($b)*
        }

        $($ometa)*
        pub struct $O {
            $($o)*
        }

        impl $O {
            /// Borrows the owned form as the form the engine reads (inlined: a caller
            /// that reads a few fields borrows only those).
            #[inline]
            pub fn view(&self) -> compiled_form!(@view_type $B $S) {
                $B {
                    $( $f: compiled_form!(@view self.$f, $kind), )*
                }
            }
        }

        impl $crate::form::Literal for $O {
            fn write_literal(&self, w: &mut $crate::form::LiteralWriter) {
                w.item(stringify!($B));
                w.text(" { ");
                $( w.field(stringify!($f), &self.$f); )*
                w.text("}");
            }
        }
    };

    (@view $e:expr, value) => { $e };
    (@view $e:expr, nested) => { $e.view() };
    (@view $e:expr, $other:ident) => { &$e };

    (@view_type $B:ident [$S:ident]) => { $B<'_, String> };
    (@view_type $B:ident []) => { $B<'_> };
}
