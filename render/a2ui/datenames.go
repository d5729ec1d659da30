package a2ui

import "strings"

// dateNames are the month and weekday names of one language (CLDR "format"
// forms, wide and abbreviated). Weekdays start on Sunday, as time.Weekday.
type dateNames struct {
	months, monthsShort [12]string
	days, daysShort     [7]string
}

func words(s string) []string { return strings.Split(s, "|") }

func makeNames(months, monthsShort, days, daysShort string) *dateNames {
	n := &dateNames{}
	copy(n.months[:], words(months))
	copy(n.monthsShort[:], words(monthsShort))
	copy(n.days[:], words(days))
	copy(n.daysShort[:], words(daysShort))
	return n
}

var dateNamesByLang = map[string]*dateNames{
	"en": makeNames(
		"January|February|March|April|May|June|July|August|September|October|November|December",
		"Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec",
		"Sunday|Monday|Tuesday|Wednesday|Thursday|Friday|Saturday",
		"Sun|Mon|Tue|Wed|Thu|Fri|Sat"),
	"de": makeNames(
		"Januar|Februar|März|April|Mai|Juni|Juli|August|September|Oktober|November|Dezember",
		"Jan.|Feb.|März|Apr.|Mai|Juni|Juli|Aug.|Sept.|Okt.|Nov.|Dez.",
		"Sonntag|Montag|Dienstag|Mittwoch|Donnerstag|Freitag|Samstag",
		"So.|Mo.|Di.|Mi.|Do.|Fr.|Sa."),
	"fr": makeNames(
		"janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre|novembre|décembre",
		"janv.|févr.|mars|avr.|mai|juin|juil.|août|sept.|oct.|nov.|déc.",
		"dimanche|lundi|mardi|mercredi|jeudi|vendredi|samedi",
		"dim.|lun.|mar.|mer.|jeu.|ven.|sam."),
	"es": makeNames(
		"enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre",
		"ene|feb|mar|abr|may|jun|jul|ago|sept|oct|nov|dic",
		"domingo|lunes|martes|miércoles|jueves|viernes|sábado",
		"dom|lun|mar|mié|jue|vie|sáb"),
	"it": makeNames(
		"gennaio|febbraio|marzo|aprile|maggio|giugno|luglio|agosto|settembre|ottobre|novembre|dicembre",
		"gen|feb|mar|apr|mag|giu|lug|ago|set|ott|nov|dic",
		"domenica|lunedì|martedì|mercoledì|giovedì|venerdì|sabato",
		"dom|lun|mar|mer|gio|ven|sab"),
	"nl": makeNames(
		"januari|februari|maart|april|mei|juni|juli|augustus|september|oktober|november|december",
		"jan|feb|mrt|apr|mei|jun|jul|aug|sep|okt|nov|dec",
		"zondag|maandag|dinsdag|woensdag|donderdag|vrijdag|zaterdag",
		"zo|ma|di|wo|do|vr|za"),
	"pt": makeNames(
		"janeiro|fevereiro|março|abril|maio|junho|julho|agosto|setembro|outubro|novembro|dezembro",
		"jan.|fev.|mar.|abr.|mai.|jun.|jul.|ago.|set.|out.|nov.|dez.",
		"domingo|segunda-feira|terça-feira|quarta-feira|quinta-feira|sexta-feira|sábado",
		"dom.|seg.|ter.|qua.|qui.|sex.|sáb."),
}

// names returns the locale's date names, English when it has none.
func (l locale) names() *dateNames {
	if n, ok := dateNamesByLang[l.lang]; ok {
		return n
	}
	return dateNamesByLang["en"]
}

func firstRune(s string) string {
	for _, r := range s {
		return strings.ToUpper(string(r))
	}
	return ""
}
