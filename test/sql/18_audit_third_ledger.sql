-- Audit 0.10.0, third pass, item 1 (test/audit/FINDINGS-0.10.0-third.md):
-- the dedup ledger could be hash-flooded.  Its exclusion constraint hashed
-- each key (source_id || ':' || event_id) with hashtext(), PostgreSQL's
-- unseeded lookup3, so event ids sharing one hash code are cheap to make
-- (test/audit/ledger_collide.c made the 401 below, for source number
-- 424242), and each insert or duplicate check then compared its id with
-- every one of them.  The constraint now hashes with webhook_ingest.ledger_ops
-- (SipHash-2-4 under this cluster's key): the same ids spread over the
-- index, a probe rechecks no more than chance makes it, and dedup stays
-- exact.  The check is what EXPLAIN counts (Rows Removed by Index Recheck),
-- not a time; bench/ledger_flood times it.
\set VERBOSITY terse
CREATE TEMP TABLE flood (n serial, id text COLLATE "C");
INSERT INTO flood (id) SELECT x FROM unnest(string_to_array($ids$
+#[jWw~Dhbl<E|o?=
3ABf^wWeNE/?]XM_s
Cu7J;kv%=Qh|.F!KJ
`w&=[}dbF~eQ7qc4r
hf{nLy`5p{m0a.^@!
Q&[|RR`7]CZKAX4ww
-M`[:).Co<Y+ztm]<
gp|e0cpLgw#~ZkvM&
>^BMR&e*mFkacnUa7
sf616jp/DQpvmr/5S
VSv++FVJP7Tozi[?Q
;i<EALd.~(zU}FWjZ
&U}_M40((24Tev2h0
grMkgwHH^6faoq|vu
-3}ARb:/=(fE8{m84
/|@mc|iu<.#~.}WBn
@@F242vrr#kCkBL{*
,96CJkU;5Hf?b0pfr
ZIOfn1FfG,S>U#n5U
.[<q!g|~-r*6_k&{9
-5x,ZSLFvaWVHcj~|
.}fx=4m1aB%,%?E(V
?l1MZg{.hR/9,o.Mh
Is,351KOj+%@q]d,z
^~^YMW8OP_+r].96/
sk3~5c7PLG6Nb{i/x
kySB9T;P?BEW7v(>e
/XV/rQ}|jl)ig?l%g
rgH!d*P`bF]DhC1_u
,6L*g;e.HUiG46x6o
>t8X_X2(fnRYq0{tA
AQlgF80T^EsSvm^Js
m}(qEY}R3OynaA:3h
[e#5|#ZrQZQ]X|tC%
},UHb4jrG:!(8+7J8
x?IVgnAOP>iK//4im
c+DReNsZ.:r2{ONH)
ljI]<IA)4a_cO7_ac
x`>=hn0>xJHfu[>O+
c6*`fpFL;+|nkXO_b
Ma%}%WAUH5{P*W-<W
){xc<aK=#H+n~vBz|
Bw:[MKz*LI/o9sV}r
KvPp7,).:)W/&?2?:
x4t+gSq,!~P%[Md/%
4F<ln(]pA~G-+x~&F
T?9n?OgUb.q;<ulEl
8{.E+<?YK_I>1S)JE
C%o?S9sN|cv2}fMld
liwuK{4:u]Vx>L98K
f;KTF<16Jv,sI4nJ@
7_k0b_lLS1k!z|t.,
_We>KAdGISL#Up#@l
}47aO!xd~w2<|-@Ml
iH03P:Z+3AEN_G91x
^JB<}4-H(W}nQ:@i.
3^:6@[;Qm&OiRr4V`
8H,mBI|^C7Ahm&3ZJ
/~p1HWg|_}VOVdx&T
F_fzU4`0Dff`nE|zQ
Cp<p-2|u}Tc8a?V?,
4-vZMXm`>K.|)p!!c
b8cR1Q|/{LD42.[Ga
tMFC1Is^t[{?]E2A.
q/uB~ByRRYq:RbO?I
Tf!I3K!Pb>[7o6`Jo
eaQ3E1HMvbjkJP1<x
RbhKL4%@G%%p0n*ZY
E>Zyu&Noj@|AP}!X+
_N;F(vhi6(/(UopEp
Df.o@i^ZLEuQ3YFmA
*`j%8_0aq;@&FNWe7
,W*jV_@]RKB1y=Rb+
s:Tun~)&I>fgp(d~}
lRo@YJ4@XxJ<j|ViW
feHRS9bf#^T~P(@?N
y,S-vcMn@G5(ALG@F
B:042IP,Evl3|t(gd
g&#dl7!y{vc(;^aBG
9gi!;A8-.hWMm_JNn
(-/g[%k1-Ov7.Efkz
O1_=@Zw>3*TJEE%TO
_wz#jBN3P&)R&0j}T
vBy8ER<VD_7O?VC]#
0w{,|DZ`v.*rd|JhB
||nCSg_0|fO6z?>_^
R7/*~0yQ7;;UgWcS_
T!f~]Q%mNKX#.*cs>
zlih*1j4&jiDjx{mU
.C`mYpe4<zHk>{Q|`
.mmK_*/RUoo={H5Fg
wGcL|3jpN6#gB1i^*
=D176Q386VzK>`G4:
Rtz}Az5BT-JyA2E<8
*K(=:XtMOi]`ycpQI
irM&il8DOoE{2RI&u
5}}X^ke.1Me0v*1Y,
eT6}%aZ<ySP4vivph
kN<)v}P0>%QexZTY2
gl|]C;%giYObz)z:N
uN|!TJIXyoy_2-=yW
8g`1l+]D`<rW>)`V}
uljk|)1/m`?NN;/0]
pppMapUWx7~w=ruwC
I#]Z?5CZ5e5gS~l+c
bnKIcy0oO@tjE:j_Y
O~ck9K6tOK|=f)(Be
:cI09].#:B3Xg0edn
(<qHfL0L!O=[utP1Z
#3!MRL-(]SEb0l/-Z
I]c>rQoPp|Ep{kSR3
qQ&PAk!:F{VTYhzdC
8Fq6r9NkOA[%T3o_m
d=+?K5{@xp1c.+h=t
{yhE{UaJ*N]aY2U/2
aJ>A6_6eT*QQZYzmm
1j[k:~3nG%&r)TCNe
K@n{SoHHZqlO#b/IS
.q-}05Zl)tlSBpdae
j{enpGmMn+hldlhQ!
]7q}driw?gVH0RCMe
iarv]B:DrhflIuN;p
-z:tZ}q@)hljWh!|^
y4@-t]1T{~!&i&c8w
68pM&G#Q<iUX~_GH!
Di4-fP*B<z7yd-S8g
/i>`ZCOosN;r}f`uB
^_Bj=y8A^N^j8f#P0
He_#pk)qL(Ib9c1HT
Qw.[@Oy7G|)0U;=iS
.{Q=%W_pQx`rt8!0-
hkFr6M8#NZsMWejhN
>OCf>f&<Kn{.L&4m6
0+4H`o`0^3uB6~vK7
1Q6OYVba1}6MNO>xh
y?w*[bi/lQv!P)#|O
UB6q[.3]Gmp.1v}6L
ZY5-N&g#s{d}#/nD=
Smd}RtYJi:83NL:?)
A|Syw}sr+UX::F<{[
PZ9QH`)g[q(0i<)h6
zV+4b,HY`!z!tqwW+
X_j~FEc?R-N<2([-~
D*R-xB?kz~)Esvnyz
]YB01[(%n+%Db{B;v
:/c#/azkB`YZbgny8
w?_G;_5U#:LAkY=mD
[gl+cKOISI4a]m7kc
rXTPffRS[Ih+WUw{o
?DP0FFE5O^^MiWjj%
dphX9Pw`!.6`|?M-;
;*ZpzrTi&oTVd`V|V
JMIl1/;idpT.9x80.
+/A-B?dDu*/w3C+%h
A1Dtt[8Cph)Xgw!@p
+Kx~U8Ad=uMW8Igr2
LE}gJ@=w}C2b/>IZq
rQO9dJMkP~+y5I#tE
QG5>VM]R4O(6}NH!Y
[h!EEXSsx@DA1j.ji
7%d)YgNf<Jq_qYft0
lS2]VdOAe)y&B<69+
7zleXyU.Z-:<Jrr{i
T|aR;lGUo^Y,(Nv3Y
Z+aKyV]rC4zO9OxM,
)d]9nd*1P&H21upAW
CY<k#4M`MtcFh)Plb
*N8;Of5^9NNCsdKzO
D@Ab~SI`f#i]nl?%_
`z(#xH>~VC]XyQ:`y
G[B-#n^xiO?lzo@}y
4@&}G{EOr;}1|5UoI
e.UBN5k~{qB=t=^]p
2zrWiiT%ZOs6F9OZ4
aLbKJOdI-Nq[YKB_W
^rvO`*)c8?0)LLT~)
g8DHa[n}wP-R~igih
V>Yrm?S*%+mO_z_!>
0`VnqfRn;p/pU(PPo
p4Yo)ua|/G]>Uci.S
gW`n@uiEI)u!Z6_Z#
4EUJM5oA/s`FDpB2Z
^C,N,1d~p#>m79l>H
?>{5=)X*4TAn2*>x0
P{c>E-{`jGsRPw7YA
r[+ENdajq07:7AFd^
}><%IN:}6mP@H{x71
:&)}~jxb_1&/||rZJ
FBK34a:d|dQDpt<1Q
]ArYdTY_A|bySFWX3
,NGa1O@Y57,[fkq=p
!iTv|P`XaPX@;5ptH
D7mCYktr|q2(RD>gq
Q/u;EGO<Y,:J[]FbP
%Z~84>FIcQ>mxuJIF
rqd-I&-`B3AS5joG&
?yx+#t{g.~w;WY[:h
?@E}%T37C!<I,:@A1
yB.J-~zn5v9|m&,pS
.;Zq5r~Q(rFPLC=jO
uB2njpm=ix?{W0ZqU
D]~|3rQ&r30KZL_!K
2?n}{OXzxOrit69Ca
Ksg7c93j)Q%MrT@1K
Utr=hbFm}7[Z2_DEx
>ORKpJQl23eQ&&2JY
XBHuP<IL:V92`!J|j
-!?}-KrObF;kv.iE1
{?Jh?:P+{`X;%c%%>
qr/YC,;^t,B!*AdT?
gt.qA_zP2T}Jr|cOc
0CJA%^N1:[Sd-hpP,
Uv#n{@7XQ6~oqN3x`
hZyO7K&uY|(+R%riK
1>0W0+gls|3Vvk|l0
e}-LLpCUM*7u>T71[
3mC[{Kx*:2stSRYm{
ahXYbeOZv^YAOsy#q
(.^5R.EKSErETo/qa
k{TX)h~e8zp9dQ*uK
,U/k24(`/aw,J+}60
8.BLjl,Kap|Mxk|P5
3_k>m(+<!xT.d{ye4
,y`>G2)F?{Kodr>0Q
Q+O,E*Mgh7-&mJ_pF
{he@9*2Q3&sn<].<#
J)r0tl)9@1/|.(IV|
JTk4!64QBdE(SY<~c
*aon:iUKy)vcIVt?V
L46y(+Wtx*,2/0w->
}n/knh>5*)~!`>yo`
7{tpi?AHXDTIDZ@e3
JE035Qve@rO}sxj6w
B%ks)2ue~BNt7X#{-
0z}*u%5[5e<;hw/,`
)8=c+]ei(bdMTKH.C
5-knZ%`MC!]IoB=q.
Ly|^gU}irCb=T2N7n
3}z0fAfyt6X!8)orZ
-OO=Fow(YIhf06QC1
R;qB(Ra.]4t,dL!5,
kKm*agT3+k~5If/Q4
#?w{}d8Z%en%QXy&g
-f8<8q,k8Kztb3u>3
-?}l{w+4A%&GF!:..
R:Ivu5KV4^/x5*E{I
`58@tlL~gKs[CZ&s(
y96|]}~loeLPr76k/
<}SwySvzQ8t92KM^X
MdxGY0UqoJUD5Bt2/
81wW~k4b5AR]aXRr3
?mJyM0(Z!:6<#kgfJ
}B+WM!a<~GZViIIG&
1j_dV/!/r*>G4:d?^
=^%_*63-O}w7m,Khb
,#U{)tfGY&jCVjO%^
Be21-]^k:!5U:1|F=
^A,jvDw,Q86U!|RTn
-:Gc`9VRlEn4=[iJS
mj=Vb4MnRiQC_>!<%
(yvv+U,t5PvB^gU#z
1@?_U+^*@lTN7&gEE
`Gl6[r)iE@UhyXG:t
V;#P[&)So^EviOy1{
k]|DO(@7_K[?/PgI&
PPyWFz)Wr>-]YfnY7
GFp<c_cs`^K5+}d0_
Au`imi%7h~>KT%;`3
ZTw9M?<+WKabx~bWn
JYU7q3dBC[,_5T9*&
F@~:V&~Y*`6^]/|4k
*.`d.-wF)dd+PdU3_
>+@z1nTAm&!Djb4E}
]ZwRnCu_!vh[c~5F<
n3O;vfSz|vGTbfrng
}GQ1MA/z#WwXF`u%9
ZTQIp{cXG&JO4)zo[
3#[Cy3n#|lBnxwrA%
8{DCqi]_BARkD{Lk+
c~%g2]uoIW=!(aKAt
M6]F95CNt8=<iItQ{
KEwKR~x}[|St.rxK.
OwQmXBX4dOn8P2KK|
aLskmhh<iC+|Js)A@
:X-RYN({mxjDX_r;5
`1bHZ2}M(`~&cv)n4
47tsm5XeDE&R^,55.
95Z?SC}C(NEe#+)Tn
p)nYejEv6A-|GQ?L4
ORv`ww|x+`0<DTy?0
+9HZ-KCajtV50pm5k
jFWtIM{e)Q9fMq=6&
kN*|LtSiSg5c*c,zY
cvBmYqQA}Y+AIeHv>
r{*T4K&Hh?MFlJ8Pj
7s=Ozm,C:-Ro=o6#s
?77R|*ffIVhqj<Q=#
9XClj!Fq7?c83xzZN
%6,g.IP)4:dok_9|H
|-8.q]C(>@SIv03tm
i;y,rG9y^6~1~/X%s
/:^=F5~=in)|9N7QM
F@(t7&@dTk&/OD:`x
r~WS7x,ckHN)sPu45
43ylj4eHGJIY6wG#5
^9`<mgM@t/5(dxP7s
53r@>gtfw/cT1ir!.
^_,b>JK|j}!~`9]j;
E^[ZpPvakYqW:gAr,
YG=`ZWw1e.vcmNhq3
-o?SRy8(4afVaZ[{G
U)t.P>OVG[GPqT:4c
}*+&dyozeA<p.~96H
fr~.n#/-hK)jBdKZE
>3QphDc,pzph?e/=b
*RVy|e8`Adnpo%3A]
KV^l5EN/Yf]9MY!=O
(zs)Eg@b]1@]K^I1G
f{m,wVeNF#*p#ymH8
bqv7@Rq]NN*-t>=j6
Uazdz0J,hv@SFCPab
sVWPro_HXT[?OErW~
:=1DBbp|p+x`0muDa
Kxe4S.0j/MW,=`2>+
k2>PobZ:!v.6)it9u
Hk:Yen-Ow{%%!GSeo
AZ4]G>uX[:4T>y-9J
75!o5U(zBq-%Q0Tpl
tna9[q9SD:XG9luRr
y6~UMUK-I#U-:yl_,
W[Pfa(XVr|g<X4w6|
5hL)t{;yH~)+;gK0?
X%^I<ME#uxv-nwJj0
bY#JFB)(hQsva5_),
0]uJAP8+kT~>D|gX}
li4=6-h[v9ZBl:P!G
]1yQ/j._/?U[^kOuo
{|EKmKm+_i;oF5p-8
A:_O<wWa^3J!>h3W}
xEp]O9SG1y9clO<N]
q|Z<?zp:MjHm|!#v1
cH([SOwxftY2}j{09
is}])n3?D>B^^2=oW
.kl7*_({G!yhJ-]LD
14-K#1uNVs{KL4;6(
Mu6P{4#^=j^Zy0Vl&
&v)xetXu`!Rk|I4a_
-wtN7iW7>z[&<*v6m
_b-H[VW_f8QqLU*Lq
vI}Luw24g)q`4{MF4
pO`ese1IWo9#T]*os
(zH5rYd(1JTyp/4T4
hi+.28[^sHr9KOIEc
OiOJwL&MP09#tq?}w
6Z+6Ze2x)oR5hF,z^
AZ7,5GHI|CVtstQ0i
e^>o;R*)zTr>}gty@
J>lIyg+si^@~742A#
(Stl+mI@{OZ@tN^xr
~_<l:.WO;6hY86og<
Uq#RyS3f[%k4!NVmD
n-JqVO_dW~(6BKZB/
r~FhEYk<T&e<@=g@s
mqu~6{[;-74X9fo/c
Qkp]+S*A-/Vf`(IT|
PnvOr4cz8di+t_<j*
lwboz~!TP3tn1%D@F
u41=W2Pe&[?Z#5,Nk
u9BE@S~&`v{iXsdts
LN_o,{vZd.Q8u@6e,
=v}znIl#gxo/;<vcy
~]`*EHk9z*wUf?@4k
_|23h0)2w/@&ya3C)
IIOg#i~LT}48^=W~|
P*IzHaD^V]C?+7C[U
,`D:>fJjIkkLPj~R:
<~ZXkaDZX`!&qKe*j
XGr=ayeGuWa}|}mny
:q6[lX&i}H&o*p;aX
B/=m*R,304/X.!Q3v
+%2K+qc?-Pv1?z-:V
NOw{:Dv^1?}7z<H]Q
P@&ci.fQPtr;3,l:p
w]<@g?*H3(HHx@Ile
G`>e1/K~?(mZ2x^?:
_Y=}s#YD!sdQD!&v9
D~.Tn(sZ:Uum-f^yG
qYT8[bEOfY6J&w9.j
<*#]+G)Qnh0o2*hM)
qe_14*7?IiuhV&?02
]>^s_+jH}oN6UDQ5l
t9/|GSaX!MC2k0v&p
;x)W9-#xlXqW(OzR}
|-q6o_H0@Q8x85#x_
!Vik{J)OU9#{*lEPv
I{QziLs/|WRIL/I(]
a<Jx%y,}v-,mj9;vP
beRF9QHF%f|uGd1?D
Br1Qg*>P&m-Xmjdgh
+!kKfy]Vh8D}ZT{FT
LL8`P{qacTEzqz7mi
$ids$, E'\n')) x WHERE x <> '';
-- the fixture is an attack on hashtext: 401 ids, one hash code
SELECT count(*) AS ids, count(DISTINCT hashtext('424242:' || id)) AS hashtext_codes FROM flood;
-- 400 of them in the ledger, then a duplicate check of the 401st
INSERT INTO webhook_ingest.event_ledger (source_id, event_id) SELECT 424242, id FROM flood WHERE n <= 400;
CREATE FUNCTION pg_temp.rechecked(probe text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    plan json;
BEGIN
    SET LOCAL enable_seqscan = off;
    EXECUTE format('EXPLAIN (ANALYZE, FORMAT JSON) SELECT FROM webhook_ingest.event_ledger e
                     WHERE ((e.source_id::text || %L) || e.event_id) = %L', ':', probe) INTO plan;
    -- (a bitmap heap scan or an index scan: the node that rechecks is the top one)
    RETURN coalesce((plan -> 0 -> 'Plan' ->> 'Rows Removed by Index Recheck')::bigint, 0);
END $$;
SELECT pg_temp.rechecked('424242:' || id) < 5 AS probe_rechecks_few FROM flood WHERE n = 401;
SELECT pg_temp.rechecked('424242:' || id) < 5 AS hit_rechecks_few FROM flood WHERE n = 7;
-- the constraint is the keyed one, its index still 4-byte codes
SELECT c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c
 WHERE c.conrelid = 'webhook_ingest.event_ledger'::regclass;
DELETE FROM webhook_ingest.event_ledger WHERE source_id = 424242;

-- dedup stays exact: through enqueue, each id once queued, then a duplicate;
-- ids one byte apart are different ids
SELECT webhook_ingest.add_source('lf', 'http://127.0.0.1:9/x/{external_id}');
SELECT webhook_ingest.pause_source('lf');
SELECT e.outcome, count(*) FROM flood f, webhook_ingest.enqueue('lf', 'o-' || f.n, NULL, f.id) e GROUP BY 1;
SELECT e.outcome, count(*) FROM flood f, webhook_ingest.enqueue('lf', 'o-' || f.n, NULL, f.id) e GROUP BY 1;
SELECT e.outcome, count(*) FROM flood f, webhook_ingest.enqueue('lf', 'o-' || f.n, NULL, f.id || 'x') e GROUP BY 1;
SELECT count(*) AS remembered FROM webhook_ingest.events WHERE source = 'lf';

-- 0.9.0's ledger (event_ledger_090, what the update renamed it to) is checked too
-- until purge_events has moved its ids into the keyed one, and then truncated
SELECT id AS lf FROM webhook_ingest.sources WHERE name = 'lf' \gset
INSERT INTO webhook_ingest.event_ledger_090 (source_id, event_id, received)
SELECT :lf, 'old-' || i, webhook_ingest._seconds(now() - CASE WHEN i <= 10 THEN interval '30 days' ELSE interval '1 hour' END)
  FROM generate_series(1, 2000) i;
SELECT pg_relation_size('webhook_ingest.event_ledger_090') > 0 AS old_ledger_holds_ids;
SELECT e.outcome FROM webhook_ingest.enqueue('lf', 'o-old', NULL, 'old-500') e;
SELECT count(*) AS seen_in_events FROM webhook_ingest.events WHERE source = 'lf' AND event_id LIKE 'old-%';
SELECT sum(webhook_ingest.purge_events(100)) > 0 AS moved FROM generate_series(1, 5);
SELECT pg_relation_size('webhook_ingest.event_ledger_090') AS old_ledger_bytes,
       (SELECT ledger_090_page FROM webhook_ingest.purge_position) AS position;
SELECT count(*) AS moved_ids FROM webhook_ingest.event_ledger WHERE source_id = :lf AND event_id LIKE 'old-%';
SELECT e.outcome FROM webhook_ingest.enqueue('lf', 'o-old', NULL, 'old-500') e;
-- (the 10 older than dedup_window were forgotten, not moved)
SELECT e.outcome FROM webhook_ingest.enqueue('lf', 'o-old', NULL, 'old-5') e;

SELECT webhook_ingest.drop_source('lf', force => true);
DELETE FROM webhook_ingest.event_ledger WHERE source_id = :lf;
