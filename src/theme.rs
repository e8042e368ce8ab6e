//! Themes: named semantic roles, built-ins embedded from `themes/*.toml`, a
//! user folder that overrides them by name, partial patches over a base
//! (`extends = "dark"`), and errors that name the offending key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ratatui::style::{Color, Modifier, Style};

/// The built-in themes, embedded so that pdtop needs no files at run time.
pub const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../themes/dark.toml")),
    ("light", include_str!("../themes/light.toml")),
    ("mono", include_str!("../themes/mono.toml")),
];

/// The themes the theme key steps through, in order.
pub const CYCLE: &[&str] = &["dark", "light", "mono"];

/// Every role a theme must set.
pub const ROLES: &[&str] = &[
    "text",
    "dim",
    "title",
    "border",
    "accent",
    "prefill",
    "decode",
    "ok",
    "warn",
    "error",
    "miss_fg",
    "miss_bg",
    "badge_fg",
    "badge_bg",
    "selected_bg",
    "source_compute",
    "source_cache",
    "source_external",
];

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    colors: BTreeMap<String, Color>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: Option<String>,
    extends: Option<String>,
    #[serde(default)]
    colors: BTreeMap<String, String>,
}

impl Theme {
    /// A role's colour (`Reset` if somehow unset: never panics).
    pub fn color(&self, role: &str) -> Color {
        self.colors.get(role).copied().unwrap_or(Color::Reset)
    }

    pub fn fg(&self, role: &str) -> Style {
        Style::new().fg(self.color(role))
    }

    pub fn text(&self) -> Style {
        self.fg("text")
    }

    pub fn dim(&self) -> Style {
        self.fg("dim")
    }

    /// The style of a silent-miss alarm: loud in every theme, mono included.
    pub fn alarm(&self) -> Style {
        self.loud(Style::new().fg(self.color("miss_fg")).bg(self.color("miss_bg")))
    }

    pub fn badge(&self) -> Style {
        self.loud(Style::new().fg(self.color("badge_fg")).bg(self.color("badge_bg")))
    }

    /// Bold, and reversed where there is no colour to stand out with.
    fn loud(&self, s: Style) -> Style {
        let s = s.add_modifier(Modifier::BOLD);
        if self.is_mono() { s.add_modifier(Modifier::REVERSED) } else { s }
    }

    pub fn selected(&self) -> Style {
        let s = Style::new().bg(self.color("selected_bg"));
        if self.is_mono() { s.add_modifier(Modifier::REVERSED) } else { s }
    }

    fn is_mono(&self) -> bool {
        self.colors.values().all(|c| *c == Color::Reset)
    }

    /// Parses a theme text; `base` resolves `extends`.
    pub fn parse(text: &str, base: &dyn Fn(&str) -> Result<Theme, String>) -> Result<Theme, String> {
        let file: ThemeFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut theme = match &file.extends {
            Some(b) => base(b)?,
            None => Theme { name: String::new(), colors: BTreeMap::new() },
        };
        theme.name = file.name.unwrap_or_else(|| theme.name.clone());
        for (role, value) in file.colors {
            if !ROLES.contains(&role.as_str()) {
                return Err(format!("unknown role `{role}` (roles: {})", ROLES.join(", ")));
            }
            let color: Color =
                value.parse().map_err(|_| format!("role `{role}`: `{value}` is not a colour"))?;
            theme.colors.insert(role, color);
        }
        if let Some(missing) = ROLES.iter().find(|r| !theme.colors.contains_key(**r)) {
            return Err(format!("role `{missing}` is not set (add it, or `extends = \"dark\"`)"));
        }
        Ok(theme)
    }

    /// A built-in theme by name.
    pub fn builtin(name: &str) -> Result<Theme, String> {
        let (_, text) =
            BUILTIN.iter().find(|(n, _)| *n == name).ok_or_else(|| format!("no built-in theme `{name}`"))?;
        Theme::parse(text, &Theme::builtin)
    }

    /// The theme after this one in [`CYCLE`], looked up as `--theme NAME`
    /// is (the user's folder first); a theme outside the cycle goes to its
    /// first. This one again if the next cannot be read.
    pub fn next(&self, user_dir: Option<&Path>) -> Theme {
        let i = CYCLE.iter().position(|n| *n == self.name).map_or(0, |i| i + 1);
        let name = CYCLE[i % CYCLE.len()];
        Theme::load(name, user_dir).unwrap_or_else(|_| self.clone())
    }

    /// Resolves `--theme NAME|PATH`: a path is read as is; a name is looked
    /// up in the user's theme folder first, then among the built-ins.
    pub fn load(spec: &str, user_dir: Option<&Path>) -> Result<Theme, String> {
        let base = |name: &str| Theme::load(name, user_dir);
        let as_path = Path::new(spec);
        if spec.ends_with(".toml") || spec.contains('/') {
            let text =
                std::fs::read_to_string(as_path).map_err(|e| format!("theme {}: {e}", as_path.display()))?;
            return Theme::parse(&text, &base).map_err(|e| format!("theme {}: {e}", as_path.display()));
        }
        if let Some(dir) = user_dir {
            let path = dir.join(format!("{spec}.toml"));
            if let Ok(text) = std::fs::read_to_string(&path) {
                // A user theme may extend the built-in of the same name.
                let base = |name: &str| {
                    if name == spec { Theme::builtin(name) } else { Theme::load(name, user_dir) }
                };
                return Theme::parse(&text, &base).map_err(|e| format!("theme {}: {e}", path.display()));
            }
        }
        Theme::builtin(spec)
    }
}

/// `~/.config/pdtop/themes`.
pub fn user_theme_dir() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("pdtop").join("themes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_sets_every_role() {
        for (name, _) in BUILTIN {
            let t = Theme::builtin(name).unwrap();
            assert_eq!(&t.name, name);
            for role in ROLES {
                assert!(t.colors.contains_key(*role), "{name} lacks {role}");
            }
        }
    }

    #[test]
    fn every_file_in_themes_folder_is_builtin() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("themes");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().replace(".toml", "");
            assert!(Theme::builtin(&name).is_ok(), "themes/{name}.toml is not embedded");
        }
    }

    #[test]
    fn partial_patch_and_errors_name_the_key() {
        let t =
            Theme::parse("extends = \"dark\"\n[colors]\naccent = \"#ff8800\"\n", &Theme::builtin).unwrap();
        assert_eq!(t.color("accent"), Color::Rgb(0xff, 0x88, 0x00));
        assert_eq!(t.color("ok"), Color::Green);
        let e =
            Theme::parse("extends = \"dark\"\n[colors]\naccent = \"nope!\"\n", &Theme::builtin).unwrap_err();
        assert!(e.contains("accent"), "{e}");
        let e = Theme::parse("[colors]\ntext = \"red\"\n", &Theme::builtin).unwrap_err();
        assert!(e.contains("is not set"), "{e}");
        let e = Theme::parse("extends = \"dark\"\n[colors]\ntxet = \"red\"\n", &Theme::builtin).unwrap_err();
        assert!(e.contains("txet"), "{e}");
    }

    /// Named colours as xterm draws them by default.
    fn rgb(c: Color) -> [u8; 3] {
        match c {
            Color::Rgb(r, g, b) => [r, g, b],
            Color::Black => [0, 0, 0],
            Color::Red => [0xcd, 0, 0],
            Color::Green => [0, 0xcd, 0],
            Color::Yellow => [0xcd, 0xcd, 0],
            Color::Blue => [0, 0, 0xee],
            Color::Magenta => [0xcd, 0, 0xcd],
            Color::Cyan => [0, 0xcd, 0xcd],
            Color::Gray => [0xe5, 0xe5, 0xe5],
            Color::DarkGray => [0x7f, 0x7f, 0x7f],
            Color::LightRed => [0xff, 0, 0],
            Color::LightGreen => [0, 0xff, 0],
            Color::LightYellow => [0xff, 0xff, 0],
            Color::LightBlue => [0x5c, 0x5c, 0xff],
            Color::LightMagenta => [0xff, 0, 0xff],
            Color::LightCyan => [0, 0xff, 0xff],
            Color::White => [0xff, 0xff, 0xff],
            other => panic!("no rgb for {other:?}"),
        }
    }

    /// WCAG 2 contrast ratio.
    fn contrast(a: Color, b: Color) -> f64 {
        let lum = |c: Color| {
            let [r, g, b] = rgb(c).map(|v| {
                let v = f64::from(v) / 255.0;
                if v <= 0.03928 { v / 12.92 } else { ((v + 0.055) / 1.055).powf(2.4) }
            });
            0.2126 * r + 0.7152 * g + 0.0722 * b
        };
        let (x, y) = (lum(a), lum(b));
        (x.max(y) + 0.05) / (x.min(y) + 0.05)
    }

    #[test]
    fn every_colour_pair_is_readable() {
        const TEXT: &[&str] = &[
            "text",
            "dim",
            "title",
            "accent",
            "prefill",
            "decode",
            "ok",
            "warn",
            "error",
            "source_compute",
            "source_cache",
            "source_external",
        ];
        let mut bad = Vec::new();
        for (name, bg) in [("dark", Color::Black), ("light", Color::White)] {
            let t = Theme::builtin(name).unwrap();
            let mut check = |fg: &str, on: &str, bg: Color, min: f64| {
                let c = contrast(t.color(fg), bg);
                if c < min {
                    bad.push(format!("{name}: {fg} on {on} {c:.2} < {min}"));
                }
            };
            for role in TEXT {
                check(role, "background", bg, 4.5);
                check(role, "selected_bg", t.color("selected_bg"), 4.5);
            }
            check("border", "background", bg, 3.0);
            check("miss_fg", "miss_bg", t.color("miss_bg"), 4.5);
            check("badge_fg", "badge_bg", t.color("badge_bg"), 4.5);
        }
        assert!(bad.is_empty(), "{bad:#?}");
    }

    #[test]
    fn next_cycles_dark_light_mono() {
        let dark = Theme::builtin("dark").unwrap();
        let names: Vec<String> =
            std::iter::successors(Some(dark), |t| Some(t.next(None))).take(4).map(|t| t.name).collect();
        assert_eq!(names, ["dark", "light", "mono", "dark"]);
        let custom = Theme::parse("name = \"mine\"\nextends = \"light\"\n", &Theme::builtin).unwrap();
        assert_eq!(custom.next(None).name, "dark");
    }

    #[test]
    fn user_dir_overrides_builtin_by_name() {
        let dir = std::env::temp_dir().join(format!("pdtop-theme-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("dark.toml"), "extends = \"dark\"\n[colors]\ntext = \"red\"\n").unwrap();
        let t = Theme::load("dark", Some(&dir)).unwrap();
        assert_eq!(t.color("text"), Color::Red);
        assert_eq!(Theme::load("light", Some(&dir)).unwrap().name, "light");
        std::fs::remove_dir_all(&dir).ok();
    }
}
