package tokenize

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// A deterministic multilingual text generator for the tests and the
// benchmarks: the reference trains its models on its sentences, and both
// implementations encode its others. Its own generator (SplitMix64), not
// math/rand, so that the corpus, and so the committed models trained on
// it, are the same under every Go version.

type textGen struct{ s uint64 }

func (g *textGen) next() uint64 {
	g.s += 0x9e3779b97f4a7c15
	z := g.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a value in [0, n); the modulo's bias is of no concern here.
func (g *textGen) intn(n int) int { return int(g.next() % uint64(n)) }

// zipf picks an index in [0, n) with weight 720720/(i+1), so that a few
// words are frequent and most are rare, as in text. Integers only, so that
// the pick is the same on every platform.
func (g *textGen) zipf(n int) int {
	total := 0
	for i := range n {
		total += 720720 / (i + 1)
	}
	x := g.intn(total)
	for i := range n {
		if x < 720720/(i+1) {
			return i
		}
		x -= 720720 / (i + 1)
	}
	return n - 1
}

// language is a script's words and how its sentences are put together.
type language struct {
	name   string
	words  []string
	sep    string // between words ("" for scripts written without spaces)
	end    []string
	weight int
}

var languages = []language{
	{name: "en", sep: " ", end: []string{".", "!", "?", ",", ";", ":"}, weight: 30, words: strings.Fields(
		`the of and to in is was that for it with as he on be at by this had not are but from or have an they which one you were her all she there would their we him been has when who will more no if out so said what up its about into than them can only other new some could time these two may then do first any my now such like our over man me even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three`)},
	{name: "fr", sep: " ", end: []string{".", " !", " ?", ","}, weight: 8, words: strings.Fields(
		`le la les de des du un une et à être avoir été où çà là déjà très après français garçon hôpital forêt élève fenêtre château naïve noël cœur sœur œuvre façon reçu leçon été événement préféré à-côté aujourd'hui qu'il s'est l'été c'était maïs ambiguë`)},
	{name: "de", sep: " ", end: []string{".", "!", "?", ","}, weight: 6, words: strings.Fields(
		`der die das und ist nicht über Straße Größe Mädchen Bär schön fünf größer Fußgängerübergang Äpfel Öl Übung weiß heißen Grüße Donaudampfschifffahrt müssen können Käse Brötchen`)},
	{name: "es", sep: " ", end: []string{".", "!", "?", ","}, weight: 6, words: strings.Fields(
		`el la los de que y en un año niño señor mañana canción corazón árbol información pingüino ¿qué ¡hola acción también después según está`)},
	{name: "vi", sep: " ", end: []string{".", "?"}, weight: 3, words: strings.Fields(
		`tiếng Việt người những được của không có trong một này đã với cho các là để nhưng nước ở Hà Nội thành phố Hồ Chí Minh phở bánh mì`)},
	{name: "ru", sep: " ", end: []string{".", "!", "?", ","}, weight: 5, words: strings.Fields(
		`и в не на я быть он с что а по это она этот к но они мы как из у который то за свой Москва Россия ёлка объявление съесть здравствуйте`)},
	{name: "el", sep: " ", end: []string{".", ";", ","}, weight: 2, words: strings.Fields(
		`και το να η ο του με είναι για τα στο που θα δεν Αθήνα ελληνικά ευχαριστώ καλημέρα ψυχή`)},
	{name: "zh", sep: "", end: []string{"。", "！", "？", "，"}, weight: 8, words: []string{
		"的", "一", "是", "不", "了", "人", "我", "在", "有", "他", "这", "中", "大", "来", "上", "国", "个", "到", "说", "们",
		"中国", "北京", "上海", "学生", "老师", "电脑", "数据", "训练", "模型", "语言", "我们", "你们", "今天", "明天", "时间", "问题",
		"龘", "齉", "靐", "𠀀", "𪚥"}},
	{name: "ja", sep: "", end: []string{"。", "、", "！"}, weight: 6, words: []string{
		"の", "に", "は", "を", "た", "が", "で", "て", "と", "し", "れ", "さ", "ある", "いる", "する", "東京", "日本", "日本語",
		"ひらがな", "カタカナ", "コンピュータ", "データ", "ありがとう", "こんにちは", "ｶﾀｶﾅ", "ﾃﾞｰﾀ", "㍻", "㌔"}},
	{name: "ko", sep: " ", end: []string{".", "?", "!"}, weight: 4, words: strings.Fields(
		`나는 너는 우리 한국어 서울 학교 사랑 감사합니다 안녕하세요 데이터 모델 있습니다 없습니다 그리고 하지만`)},
	{name: "ar", sep: " ", end: []string{".", "؟", "،"}, weight: 4, words: strings.Fields(
		`في من على إلى أن هذا التي الذي كان مع عن العربية القاهرة شكرا مرحبا بيانات نموذج كِتَابٌ مُحَمَّد`)},
	{name: "he", sep: " ", end: []string{".", "?", ","}, weight: 3, words: strings.Fields(
		`של את על לא זה הוא היא עם כל אני ירושלים עברית שלום תודה נתונים מודל שָׁלוֹם`)},
	{name: "hi", sep: " ", end: []string{"।", "?"}, weight: 3, words: strings.Fields(
		`के है में की और से को का एक यह हिन्दी भारत दिल्ली नमस्ते धन्यवाद क्षत्रिय प्रश्न`)},
	{name: "th", sep: "", end: []string{" ", "ๆ "}, weight: 2, words: []string{
		"ภาษาไทย", "กรุงเทพ", "สวัสดี", "ขอบคุณ", "ข้อมูล", "โมเดล", "และ", "ที่", "เป็น", "ของ", "ไม่", "ใน"}},
	{name: "sym", sep: " ", end: []string{"", " 😀", " 👍🏽", " 🇫🇷", " 👩‍💻", " ❤️"}, weight: 4, words: strings.Fields(
		`😀 😂 🎉 👍 👍🏽 🚀 ❤️ 👩‍👩‍👧‍👦 🇯🇵 🇫🇷 ✔ € £ ¥ © ® ™ ½ ² ³ µ ﬁ ﬂ Ａ Ｂ Ｃ １２３ ｈｅｌｌｏ ℌ 𝔘𝔫𝔦 ① ② ⅷ ︵ e\u0301 n\u0303 a\u0308 A\u030A 𓀀 𐀀 𝄞 ∀x∈ℝ α+β=γ`)},
}

// sentence appends one sentence of language l.
func (g *textGen) sentence(b *strings.Builder, l *language) {
	n := 3 + g.intn(14)
	for i := range n {
		if i > 0 {
			b.WriteString(l.sep)
		}
		w := l.words[g.zipf(len(l.words))]
		if g.intn(8) == 0 {
			w = g.invented(l)
		}
		if i == 0 && l.sep == " " && g.intn(3) == 0 {
			w = titleCase(w)
		}
		b.WriteString(w)
		if g.intn(25) == 0 { // numbers, as in text
			b.WriteString(l.sep)
			b.WriteString(strconv.Itoa(g.intn(100000)))
		}
	}
	b.WriteString(l.end[g.intn(len(l.end))])
}

// invented returns a word the lists do not have, so that the vocabulary is
// open and the models must split words: syllables in alphabetic scripts,
// any of thousands of ideographs or Hangul syllables (many rarer than the
// models' character coverage, so they fall back to bytes or unk).
func (g *textGen) invented(l *language) string {
	switch l.name {
	case "zh", "ja":
		return string(rune(0x4E00 + g.intn(6000)))
	case "ko":
		return string(rune(0xAC00 + g.intn(11172)))
	}
	var b strings.Builder
	for i, n := 0, 1+g.intn(4); i < n; i++ {
		b.WriteString(onsets[g.intn(len(onsets))])
		b.WriteString(vowels[g.intn(len(vowels))])
	}
	if g.intn(2) == 0 {
		b.WriteString(codas[g.intn(len(codas))])
	}
	return b.String()
}

var (
	onsets = strings.Fields("b c d f g h j k l m n p qu r s t v w z br cr dr fl gr pl pr st str th tr sch ch sh ñ ç")
	vowels = strings.Fields("a e i o u y ai ea ou é è ê ö ü å ø ã ő")
	codas  = strings.Fields("n s t r l m ng nd st ck ß x")
)

// line returns a line of one to four sentences, mostly of one language, at
// times mixing in a second one as real documents do.
func (g *textGen) line() string {
	var b strings.Builder
	l := g.language()
	for i, n := 0, 1+g.intn(4); i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		if g.intn(6) == 0 {
			g.sentence(&b, g.language())
		} else {
			g.sentence(&b, l)
		}
	}
	return b.String()
}

func (g *textGen) language() *language {
	total := 0
	for i := range languages {
		total += languages[i].weight
	}
	x := g.intn(total)
	for i := range languages {
		if x < languages[i].weight {
			return &languages[i]
		}
		x -= languages[i].weight
	}
	return &languages[0]
}

// trainingCorpus returns the lines the reference trains its models on.
func trainingCorpus(n int) []string {
	g := textGen{s: 0x746f6b656e697a65} // "tokenize"
	lines := make([]string, n)
	for i := range lines {
		lines[i] = g.line()
	}
	return lines
}

func titleCase(w string) string {
	r, size := utf8.DecodeRuneInString(w)
	return strings.ToUpper(string(r)) + w[size:]
}

// edgeTexts are the texts every model is checked on besides generated
// ones: whitespace in every place, what NFKC rewrites, user-defined
// symbols, characters outside the models' coverage, and invalid UTF-8 of
// every kind (the reference replaces each invalid byte with U+FFFD).
func edgeTexts() []string {
	return []string{
		"", " ", "   ", "\t", "\n", "\r\n", "a", " a", "a ", "  a  b  ", "a\tb", "a\nb\n", " \u3000x\u3000 ", "\u200b",
		"x\u200by", "\u00a0a\u00a0", "ｈｅｌｌｏ　ｗｏｒｌｄ", "ﬁne ﬂow", "e\u0301 E\u0301 n\u0303", "Å Å", "①② ⅷ ㍻ ㌔", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ℌ",
		"\x00", "a\x00b", "<|sep|>", "x<|sep|>y", " <|sep|> ", "<|sep|><|sep|>", "@@@", "a@@b @@ @",
		"<ctl>", "a<ctl>b", "<s> </s> <unk> <pad>", "<0x41>",
		"😀👍🏽🇫🇷👩‍💻❤️", "𓀀𓀁 𐀀", "\u2581", "\u2581x \u2581\u2581y", "x\u2581", "1234567890 3.14159",
		"שלום world مرحبا עולם", "كِتَابٌ", "क्षत्रिय", "ภาษาไทย", "Ǆ ǅ ǆ Ⅻ ß ẞ İ ı",
		strings.Repeat("a", 3000), strings.Repeat(" ", 100) + "x", strings.Repeat("日本", 1500),
		strings.Repeat("\u2581", 40), strings.Repeat("the ", 500),
		// Invalid UTF-8.
		"\xff", "\xfe\xff", "a\x80b", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80", "\xed\xbf\xbf",
		"\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xf8\x88\x80\x80\x80", "caf\xc3", "caf\xc3 x", "\xe6\x97",
		"\xe6\x97 ", "\xf0\x9f\x98", "\xf0\x9f\x98 ok", "\xef\xbf\xbd", "\xef\xbf\xbd\xff", " \xff ", "\xff\xff\xff",
		"日本\x80語", "<|sep\xff|>", "\xff<|sep|>", "\x80 \x80", "ｈ\xffｅ", "e\xcc", "e\xcc\x81",
	}
}

// referenceTexts returns the texts the tests encode with the reference
// and with this package: the edge cases, generated lines of every
// language (some with invalid bytes or cut characters), documents of many
// lines, and one long document.
func referenceTexts() []string {
	texts := edgeTexts()
	g := textGen{s: 0x7265666572656e63} // "referenc"
	for range 1500 {
		line := g.line()
		switch g.intn(6) {
		case 0: // an invalid byte somewhere
			i := g.intn(len(line) + 1)
			line = line[:i] + string([]byte{byte(0x80 + g.intn(0x80))}) + line[i:]
		case 1: // a character cut anywhere
			line = line[:g.intn(len(line)+1)]
		case 2: // spaces and tabs in odd places
			line = strings.Repeat(" ", g.intn(3)) + strings.ReplaceAll(line, " ", strings.Repeat(" ", 1+g.intn(3))) + "\t"
		}
		texts = append(texts, line)
	}
	for range 20 {
		lines := make([]string, 10+g.intn(200))
		for i := range lines {
			lines[i] = g.line()
		}
		texts = append(texts, strings.Join(lines, "\n"))
	}
	long := make([]string, 3000)
	for i := range long {
		long[i] = g.line()
	}
	return append(texts, strings.Join(long, " "))
}
