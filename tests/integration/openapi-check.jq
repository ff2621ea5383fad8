# Check one JSON document against the schema docs/openapi.json gives for
# an operation's response (or request body), with jq alone: the test
# machine need not have Python or a schema library.
#
#   jq -r --slurpfile doc docs/openapi.json --arg path /verify --arg method post \
#      --arg status 200 -f openapi-check.jq < body.json
#
# --arg status request checks a request body instead. Prints one line per
# problem, nothing when the document conforms.
#
# It understands the subset of OpenAPI 3.0.3 schemas the document uses:
# local $ref; type (integer: a whole number); nullable as 3.0.3 defines
# it (it admits null only beside a type, and an enum must list null too);
# enum, pattern, minimum, maximum, minLength, minItems, maxItems,
# required, properties, additionalProperties (false or a schema), items,
# allOf, anyOf, oneOf. oneOf passes when at least one alternative
# matches; the document's alternatives are disjoint (additionalProperties
# false, or content_hash null against a hash), so that is exactly one
# there, and the failure message is clearer. Other keywords are ignored:
# a schema that relies on one would go unchecked, so extend this first.

def resolve($doc):
  if type == "object" and has("$ref") then
    .["$ref"] as $r
    | if ($r | startswith("#/")) | not then error("only local $ref is supported: \($r)") else . end
    | ($r | ltrimstr("#/") | split("/") | map(gsub("~1"; "/") | gsub("~0"; "~"))) as $p
    | ($doc | getpath($p)) as $t
    | if $t == null then error("unresolved $ref \($r)") else $t | resolve($doc) end
  else . end;

# JSON type names as OpenAPI spells them; a whole number is an integer.
def oatype:
  if type == "number" then (if . == (. | floor) then "integer" else "number" end)
  else type end;

def type_ok($want):
  oatype as $t | $t == $want or ($want == "number" and $t == "integer");

def errors($doc; $schema; $at):
  . as $v
  | ($schema | resolve($doc)) as $s
  | if $s.type != null and ($v | type_ok($s.type) | not)
       and ($v != null or $s.nullable != true) then
      "\($at): expected \($s.type)\(if $s.nullable == true then " or null" else "" end), got \($v | if . == null then "null" else oatype end)"
    else
      (if $s.enum != null and (any($s.enum[]; . == $v) | not) then
         "\($at): \($v | tojson) is not one of \($s.enum | tojson)" else empty end),
      (if $s.pattern != null and ($v | type) == "string" and ($v | test($s.pattern) | not) then
         "\($at): \($v | tojson) does not match \($s.pattern)" else empty end),
      (if $s.minimum != null and ($v | type) == "number" and $v < $s.minimum then
         "\($at): \($v) is below the minimum \($s.minimum)" else empty end),
      (if $s.maximum != null and ($v | type) == "number" and $v > $s.maximum then
         "\($at): \($v) is above the maximum \($s.maximum)" else empty end),
      (if $s.minLength != null and ($v | type) == "string" and ($v | length) < $s.minLength then
         "\($at): shorter than \($s.minLength) characters" else empty end),
      (if ($v | type) == "array" then
         (if $s.minItems != null and ($v | length) < $s.minItems then
            "\($at): fewer than \($s.minItems) items" else empty end),
         (if $s.maxItems != null and ($v | length) > $s.maxItems then
            "\($at): more than \($s.maxItems) items" else empty end),
         (if $s.items != null then
            range(0; $v | length) as $i | $v[$i] | errors($doc; $s.items; "\($at)[\($i)]")
          else empty end)
       else empty end),
      (if ($v | type) == "object" then
         (($s.required // [])[] | select(. as $k | $v | has($k) | not)
           | "\($at): missing required property \"\(.)\""),
         (($s.properties // {}) | to_entries[] | select(.key as $k | $v | has($k))
           | . as $p | $v[$p.key] | errors($doc; $p.value; "\($at).\($p.key)")),
         (($s.properties // {}) as $known
           | if $s.additionalProperties == false then
               $v | keys[] | select(. as $k | $known | has($k) | not)
               | "\($at): unexpected property \"\(.)\""
             elif ($s.additionalProperties | type) == "object" then
               $v | to_entries[] | select(.key as $k | $known | has($k) | not)
               | . as $e | $e.value | errors($doc; $s.additionalProperties; "\($at).\($e.key)")
             else empty end)
       else empty end),
      (($s.allOf // [])[] as $sub | $v | errors($doc; $sub; $at)),
      (if $s.anyOf != null or $s.oneOf != null then
         ($s.anyOf // $s.oneOf) as $alts
         | [$alts[] as $sub | [$v | errors($doc; $sub; $at)]] as $each
         | if any($each[]; length == 0) then empty
           else "\($at): matches none of the \(if $s.oneOf != null then "oneOf" else "anyOf" end) alternatives: "
                + ([range(0; $each | length) as $i
                    | "(\($i + 1)) \($each[$i][0:3] | join("; "))"] | join(" | "))
           end
       else empty end)
    end;

$doc[0] as $doc
| ($doc.paths[$path][$method]) as $op
| if $op == null then "\($method | ascii_upcase) \($path) is not in the document"
  else
    (if $status == "request" then $op.requestBody else $op.responses[$status] end) as $r
    | if $r == null then "\($method | ascii_upcase) \($path): \($status) is not documented"
      else
        ($r | resolve($doc) | .content["application/json"].schema) as $schema
        | if $schema == null then
            "\($method | ascii_upcase) \($path) \($status): no application/json schema is documented"
          else errors($doc; $schema; "$") end
      end
  end
