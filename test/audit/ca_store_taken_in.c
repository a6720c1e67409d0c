/*
 * ca_store_taken_in.c: audit 0.7.0 (second pass), P2.  libcurl 7.88 calls
 * CURLOPT_SSL_CTX_FUNCTION before it loads the CAs into the SSL_CTX's store,
 * and for an https:// proxy's handshake too: a store installed by the
 * callback (what src/http.c use_ca_store did) is where the proxy's CAs (the
 * system's bundle) go.
 *
 *   gcc ca_store_taken_in.c -o t -lcurl -lssl -lcrypto
 *   ./t ONE_CA.pem https://127.0.0.1:4433/                        # direct: 1 certificate
 *   ./t ONE_CA.pem https://127.0.0.1:4433/ https://127.0.0.1:4433  # https proxy: 144 (the bundle)
 * (any TLS server on 4433, e.g. openssl s_server, inside unshare -n; the
 * fetches fail, what counts is the count printed.)
 */
#include <curl/curl.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
static X509_STORE *mine;
static CURLcode cb(CURL *c, void *ctx, void *u){X509_STORE*s=SSL_CTX_get_cert_store(ctx);
 fprintf(stderr,"cb(%s): n=%d\n",(char*)u,sk_X509_OBJECT_num(X509_STORE_get0_objects(s)));SSL_CTX_set1_cert_store(ctx,mine);return CURLE_OK;}
int main(int argc,char**argv){FILE*f=fopen(argv[1],"rb");static char b[1<<20];size_t n=fread(b,1,sizeof b,f);
mine=X509_STORE_new();
CURL*e=curl_easy_init();struct curl_blob bl={b,n,CURL_BLOB_COPY};
curl_easy_setopt(e,CURLOPT_URL,argv[2]);curl_easy_setopt(e,CURLOPT_CAINFO,NULL);curl_easy_setopt(e,CURLOPT_CAPATH,NULL);
curl_easy_setopt(e,CURLOPT_CAINFO_BLOB,&bl);curl_easy_setopt(e,CURLOPT_SSL_CTX_FUNCTION,cb);curl_easy_setopt(e,CURLOPT_SSL_CTX_DATA,"x");
if(argc>3){curl_easy_setopt(e,CURLOPT_PROXY,argv[3]);curl_easy_setopt(e,CURLOPT_PROXY_SSL_VERIFYPEER,1L);}
int rc=curl_easy_perform(e);
printf("rc=%d mine now n=%d flags=%lx\n",rc,sk_X509_OBJECT_num(X509_STORE_get0_objects(mine)), X509_VERIFY_PARAM_get_flags(X509_STORE_get0_param(mine)));}
