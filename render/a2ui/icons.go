package a2ui

import (
	"strings"
	"unicode"
)

// iconGlyphs maps the catalog's icon names (and a few common Material names
// agents use anyway) to a character that mail clients and terminals show.
var iconGlyphs = map[string]string{
	"accountCircle": "👤", "add": "+", "arrowBack": "←", "arrowForward": "→",
	"attachFile": "📎", "calendarToday": "📅", "call": "📞", "camera": "📷",
	"check": "✓", "close": "✕", "delete": "🗑", "download": "⬇", "edit": "✎",
	"event": "📅", "error": "⚠", "fastForward": "⏩", "favorite": "♥",
	"favoriteOff": "♡", "folder": "📁", "help": "?", "home": "⌂", "info": "ℹ",
	"locationOn": "📍", "lock": "🔒", "lockOpen": "🔓", "mail": "✉",
	"menu": "☰", "moreVert": "⋮", "moreHoriz": "…", "notificationsOff": "🔕",
	"notifications": "🔔", "pause": "⏸", "payment": "💳", "person": "👤",
	"phone": "📞", "photo": "🖼", "play": "▶", "print": "🖨", "refresh": "↻",
	"rewind": "⏪", "search": "🔍", "send": "➤", "settings": "⚙", "share": "↗",
	"shoppingCart": "🛒", "skipNext": "⏭", "skipPrevious": "⏮", "star": "★",
	"starHalf": "⯪", "starOff": "☆", "stop": "⏹", "upload": "⬆",
	"visibility": "👁", "visibilityOff": "🚫", "volumeDown": "🔉",
	"volumeMute": "🔈", "volumeOff": "🔇", "volumeUp": "🔊", "warning": "⚠",
	// Common Material Symbols names outside the catalog.
	"priorityHigh": "❗", "directionsRun": "🏃", "flight": "✈", "schedule": "🕒",
	"thumbUp": "👍", "thumbDown": "👎", "cloud": "☁", "sunny": "☀",
	"restaurant": "🍴", "localCafe": "☕", "shoppingBag": "🛍", "music": "♪",
	"musicNote": "♪", "chat": "💬", "link": "🔗", "public": "🌐",
}

// iconGlyph returns the glyph of an icon name ("skipNext", "skip_next" or
// "skip-next"), or "" when the name is unknown.
func iconGlyph(name string) string {
	return iconGlyphs[camel(name)]
}

func camel(name string) string {
	if !strings.ContainsAny(name, "_- ") {
		return name
	}
	var b strings.Builder
	up := false
	for _, r := range name {
		if r == '_' || r == '-' || r == ' ' {
			up = b.Len() > 0
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// humanize turns an icon name into words: "skipPrevious" → "skip previous".
func humanize(name string) string {
	name = camel(strings.TrimSpace(name))
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
