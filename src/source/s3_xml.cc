#include "prepfs/source/s3_xml.h"

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <ctime>

#include "prepfs/common/error.h"

namespace prepfs::s3 {
namespace {

constexpr size_t kMaxDepth = 64;

[[noreturn]] void bad(const char* why) { throw Error(EIO, std::string("malformed S3 XML: ") + why); }

void append_utf8(std::string& out, uint32_t cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) bad("invalid character reference");
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Character data between tags: entities decoded.
void append_text(std::string& out, std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '&') {
      size_t amp = s.find('&', i);
      if (amp == std::string_view::npos) amp = s.size();
      out.append(s.substr(i, amp - i));
      i = amp;
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 12) bad("unterminated entity");
    std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp")
      out += '&';
    else if (ent == "lt")
      out += '<';
    else if (ent == "gt")
      out += '>';
    else if (ent == "quot")
      out += '"';
    else if (ent == "apos")
      out += '\'';
    else if (ent.size() >= 2 && ent[0] == '#') {
      bool hex = ent[1] == 'x' || ent[1] == 'X';
      std::string_view digits = ent.substr(hex ? 2 : 1);
      uint32_t cp = 0;
      auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
      if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size()) bad("bad character reference");
      append_utf8(out, cp);
    } else {
      bad("unknown entity");
    }
    i = semi + 1;
  }
}

bool is_name_end(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '/' || c == '>'; }

std::string_view local_name(std::string_view name) {
  size_t colon = name.rfind(':');
  return colon == std::string_view::npos ? name : name.substr(colon + 1);
}

bool parse_u64(std::string_view s, uint64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void walk_xml(std::string_view xml, const XmlEndFn& on_end) {
  std::vector<std::string_view> stack;
  std::string text;
  bool seen_root = false;
  size_t i = 0;
  auto find_or_fail = [&](std::string_view what, size_t from, const char* why) {
    size_t at = xml.find(what, from);
    if (at == std::string_view::npos) bad(why);
    return at;
  };
  while (i < xml.size()) {
    if (xml[i] != '<') {
      size_t lt = xml.find('<', i);
      if (lt == std::string_view::npos) lt = xml.size();
      std::string_view chunk = xml.substr(i, lt - i);
      if (stack.empty()) {
        if (chunk.find_first_not_of(" \t\r\n") != std::string_view::npos) bad("text outside the root element");
      } else {
        append_text(text, chunk);
      }
      i = lt;
      continue;
    }
    std::string_view rest = xml.substr(i);
    if (rest.starts_with("<?")) {
      i = find_or_fail("?>", i + 2, "unterminated processing instruction") + 2;
    } else if (rest.starts_with("<!--")) {
      i = find_or_fail("-->", i + 4, "unterminated comment") + 3;
    } else if (rest.starts_with("<![CDATA[")) {
      size_t end = find_or_fail("]]>", i + 9, "unterminated CDATA");
      if (stack.empty()) bad("CDATA outside the root element");
      text.append(xml.substr(i + 9, end - i - 9));
      i = end + 3;
    } else if (rest.starts_with("<!")) {
      size_t end = find_or_fail(">", i + 2, "unterminated declaration");
      if (xml.substr(i, end - i).find('[') != std::string_view::npos) bad("internal DTD subsets are not supported");
      i = end + 1;
    } else if (rest.starts_with("</")) {
      size_t end = find_or_fail(">", i + 2, "unterminated end tag");
      std::string_view name = xml.substr(i + 2, end - i - 2);
      while (!name.empty() && (name.back() == ' ' || name.back() == '\t' || name.back() == '\r' || name.back() == '\n'))
        name.remove_suffix(1);
      if (stack.empty() || local_name(name) != stack.back()) bad("mismatched end tag");
      on_end(stack, text);
      stack.pop_back();
      text.clear();
      i = end + 1;
    } else {
      size_t j = i + 1;
      while (j < xml.size() && !is_name_end(xml[j])) j++;
      std::string_view name = xml.substr(i + 1, j - i - 1);
      if (name.empty() || name.find_first_of("<&\"'=") != std::string_view::npos) bad("bad element name");
      // Attributes are skipped, honouring quotes (a '>' may sit inside a quoted value).
      char quote = 0;
      while (j < xml.size()) {
        char c = xml[j];
        if (quote) {
          if (c == quote) quote = 0;
        } else if (c == '"' || c == '\'') {
          quote = c;
        } else if (c == '>') {
          break;
        } else if (c == '<') {
          bad("'<' inside a tag");
        }
        j++;
      }
      if (j >= xml.size()) bad("unterminated start tag");
      bool self_closing = xml[j - 1] == '/' && j - 1 > i + name.size();
      if (stack.empty() && seen_root) bad("more than one root element");
      if (stack.size() >= kMaxDepth) bad("nesting too deep");
      seen_root = true;
      stack.push_back(local_name(name));
      text.clear();
      if (self_closing) {
        on_end(stack, text);
        stack.pop_back();
      }
      i = j + 1;
    }
  }
  if (!stack.empty()) bad("unclosed element");
  if (!seen_root) bad("no root element");
}

ListPage parse_list_objects_v2(std::string_view xml) {
  ListPage page;
  ObjectEntry cur;
  bool have_key = false, have_size = false, url_encoded = false, is_list = false;
  std::optional<std::string> error_code;
  walk_xml(xml, [&](const std::vector<std::string_view>& path, const std::string& text) {
    if (path[0] == "Error") {
      if (path.size() == 2 && path[1] == "Code") error_code = text;
      return;
    }
    if (path[0] != "ListBucketResult") bad("not a ListBucketResult");
    is_list = true;
    if (path.size() == 2) {
      if (path[1] == "IsTruncated")
        page.truncated = text == "true";
      else if (path[1] == "NextContinuationToken")
        page.next_token = text;
      else if (path[1] == "EncodingType")
        url_encoded = text == "url";
      else if (path[1] == "Contents") {
        if (!have_key || !have_size) bad("an object without Key or Size");
        page.objects.push_back(std::move(cur));
        cur = ObjectEntry{};
        have_key = have_size = false;
      }
    } else if (path.size() == 3 && path[1] == "Contents") {
      if (path[2] == "Key") {
        cur.key = text;
        have_key = true;
      } else if (path[2] == "Size") {
        if (!parse_u64(text, cur.size)) bad("bad Size");
        have_size = true;
      } else if (path[2] == "LastModified") {
        cur.last_modified_ns = parse_iso8601_ns(text);
      } else if (path[2] == "ETag") {
        cur.etag = normalize_etag(text);
      }
    }
  });
  if (error_code) throw Error(EIO, "S3 listing answered with error " + *error_code);
  if (!is_list) bad("not a ListBucketResult");
  if (url_encoded)
    for (auto& o : page.objects) o.key = url_decode(o.key);
  if (page.truncated && page.next_token.empty()) bad("truncated listing without a continuation token");
  return page;
}

std::optional<ErrorBody> parse_error_body(std::string_view xml) noexcept {
  try {
    ErrorBody e;
    bool is_error = false;
    walk_xml(xml, [&](const std::vector<std::string_view>& path, const std::string& text) {
      if (path[0] != "Error") return;
      is_error = true;
      if (path.size() != 2) return;
      if (path[1] == "Code")
        e.code = text.substr(0, 128);
      else if (path[1] == "Message")
        e.message = text.substr(0, 512);
      else if (path[1] == "Region")
        e.region = text.substr(0, 64);
    });
    if (!is_error) return std::nullopt;
    return e;
  } catch (...) {
    return std::nullopt;
  }
}

int64_t parse_iso8601_ns(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+00:00)?
  auto num = [&](size_t at, size_t len) {
    int v = 0;
    if (at + len > s.size()) bad("bad timestamp");
    for (size_t k = at; k < at + len; k++) {
      if (s[k] < '0' || s[k] > '9') bad("bad timestamp");
      v = v * 10 + (s[k] - '0');
    }
    return v;
  };
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' ||
      s[16] != ':')
    bad("bad timestamp");
  std::tm tm{};
  tm.tm_year = num(0, 4) - 1900;
  tm.tm_mon = num(5, 2) - 1;
  tm.tm_mday = num(8, 2);
  tm.tm_hour = num(11, 2);
  tm.tm_min = num(14, 2);
  tm.tm_sec = num(17, 2);
  if (tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
    bad("bad timestamp");
  size_t k = 19;
  int64_t frac_ns = 0;
  if (k < s.size() && s[k] == '.') {
    k++;
    int64_t scale = 100'000'000;
    size_t digits = 0;
    while (k < s.size() && s[k] >= '0' && s[k] <= '9') {
      frac_ns += (s[k] - '0') * scale;
      scale /= 10;
      k++;
      digits++;
    }
    if (digits == 0) bad("bad timestamp");
  }
  std::string_view zone = s.substr(k);
  if (!(zone.empty() || zone == "Z" || zone == "z" || zone == "+00:00")) bad("timestamp not in UTC");
  time_t t = timegm(&tm);
  if (t > kMaxTimestampSeconds || t < -kMaxTimestampSeconds) bad("timestamp out of range");
  return int64_t(t) * 1'000'000'000 + frac_ns;
}

std::string normalize_etag(std::string_view etag) {
  while (!etag.empty() && (etag.front() == ' ' || etag.front() == '\t')) etag.remove_prefix(1);
  while (!etag.empty() && (etag.back() == ' ' || etag.back() == '\t' || etag.back() == '\r' || etag.back() == '\n'))
    etag.remove_suffix(1);
  if (etag.starts_with("W/")) etag.remove_prefix(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return std::string(etag);
}

std::string url_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '%') {
      int hi = i + 2 < s.size() ? hexval(s[i + 1]) : -1, lo = i + 2 < s.size() ? hexval(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) bad("bad percent escape");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace prepfs::s3
